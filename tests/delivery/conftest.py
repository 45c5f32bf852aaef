"""Fixtures for the delivery engine tests: a loopback receiver and worker settings overrides."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from tenancy.settings import get_settings

from tests.receiver import Receiver

# Names under this zone are answered by the `dns` fixture (at the socket level, below our code).
FAKE_ZONE = ".switchboard.test"


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


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], None]:
    """`dns(name, address)` makes `name` resolve to `address` from now on; any other name
    under FAKE_ZONE does not resolve (at once, whatever the machine's DNS)."""
    records: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.endswith(FAKE_ZONE):
            if name not in records:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return real(records[name], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return records.__setitem__
