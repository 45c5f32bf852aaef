"""Fixtures for the delivery engine tests: a loopback receiver and worker settings overrides."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from tenancy.settings import get_settings

from .receiver import Receiver


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    server = await Receiver().start()
    yield server
    await server.stop()


@pytest.fixture
def worker_env() -> Iterator[Callable[..., None]]:
    """Override environment settings for workers started in this test; restored afterwards."""
    saved: dict[str, str | None] = {}

    def apply(**values: str) -> None:
        for key, value in values.items():
            saved.setdefault(key, os.environ.get(key))
            os.environ[key] = value
        get_settings.cache_clear()

    yield apply
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    get_settings.cache_clear()
