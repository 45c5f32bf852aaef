"""Which exceptions mean "a backing service is down" (answered 503), not "our bug" (500)."""

import asyncio
import socket

import asyncpg
import redis.exceptions

UNAVAILABLE = (
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
    socket.gaierror,
    asyncio.TimeoutError,
    OSError,
)


def unavailable(exc: BaseException) -> bool:
    return isinstance(exc, UNAVAILABLE)
