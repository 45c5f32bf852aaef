"""Fixtures of the contact tests: an active member to assign, and the plain webhook receiver."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.factories import make_member
from tests.receiver import recording_receiver  # noqa: F401  (`receiver`: answers scripted statuses, then 200)


@pytest.fixture
async def member(client: Any, mailbox: Any, tenant: Any) -> uuid.UUID:
    return await make_member(client, mailbox, tenant)
