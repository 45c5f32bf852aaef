"""Fixtures of the tenant-operation tests: a sub-account with something of everything."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.factories import Populated, populate


@pytest.fixture
async def populated(client: Any, pool: asyncpg.Pool) -> Populated:
    return await populate(client, pool)
