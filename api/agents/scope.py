"""The key's sub-account, as the voice routes (agents, numbers, pools, calls) need it."""

from __future__ import annotations

import uuid

from api.auth import principal


def sub_account_id() -> uuid.UUID:
    """The key's sub-account (routes that take a sub-account key always have one)."""
    found = principal().sub_account_id
    assert found is not None
    return found
