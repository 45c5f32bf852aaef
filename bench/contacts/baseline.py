"""The baseline of the contacts benchmark: a bare ASGI app doing the service's SQL on asyncpg.

No framework, no validation models, no rate limiter: per request it resolves the API key as the
service does (the same control query, behind the same cache of resolved keys, so
SWITCHBOARD_AUTH_CACHE_SECONDS means the same for both), then runs the same tenant statements as
the service (in a tenant transaction, as the service does, row security included; a new
contact's `contact.created` event too) and writes the same JSON shape.
Run: `python -m bench.contacts.baseline PORT [WORKERS]` (DATABASE_URL must be set); several
workers share the port as `switchboard serve --workers` does.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

import asyncpg

from api.contacts.service import (
    CONTACT_COLUMNS,
    INSERT_CONTACT,
    SELECT_CONTACT,
    SELECT_MATCH_FOR_UPDATE,
    STORED,
    emit_created,
    run_search,
    search_conditions,
)
from api.tags.service import SELECT_TAG_SUMMARY, TAG_SCAN
from tenancy.clock import iso
from tenancy.db import create_pool, set_search_path, tenant_transaction
from tenancy.principals import PrincipalCache
from tenancy.settings import get_settings

PREFIX = "/webhooks/inbound"
POOL: asyncpg.Pool | None = None
# BENCH_BASELINE_ROW_SECURITY=off: the tenant statements run under the connecting role (the
# benchmark's superuser, which row-level security does not hold) instead of the tenant role, so
# that one run measures what the policies and the role switch cost (CONTRACT 18: at most 5 %).
ROW_SECURITY = os.environ.get("BENCH_BASELINE_ROW_SECURITY", "on") != "off"
PRINCIPALS = PrincipalCache(get_settings().auth_cache_seconds)
COLUMNS = [name.strip() for name in CONTACT_COLUMNS.split(",")]


@asynccontextmanager
async def _without_row_security(
    pool: asyncpg.Pool, schema: str
) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn, conn.transaction():
        await set_search_path(conn, schema)
        yield conn


TRANSACTION = tenant_transaction if ROW_SECURITY else _without_row_security


def _default(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    return iso(value)


def contact(row: asyncpg.Record) -> dict[str, Any]:
    return {name: row[name] for name in COLUMNS}


async def handle(method: str, path: str, query: str, schema: str, body: bytes) -> tuple[int, Any]:
    assert POOL is not None
    if path == f"{PREFIX}/tags" and method == "GET":
        async with TRANSACTION(POOL, schema) as conn:
            rows = await conn.fetch(SELECT_TAG_SUMMARY, TAG_SCAN)
        tags = [{"tag": row["tag"], "count": row["count"]} for row in rows]
        return 200, {"status": "success", "tag_count": len(tags), "tags": tags}
    if path == f"{PREFIX}/contacts" and method == "GET":
        params = parse_qs(query)
        first = {name: values[0] for name, values in params.items()}
        limit, offset = min(int(first.get("limit", 50)), 100), int(first.get("offset", 0))
        # The search's statements, run by the service's own function (bench.contacts.search).
        conditions = search_conditions(
            first.get("q"), first.get("email"), first.get("phone"), params.get("tag")
        )
        async with TRANSACTION(POOL, schema) as conn:
            rows, total = await run_search(conn, conditions, limit, offset)
        return 200, {
            "status": "success",
            "total": total,
            "limit": limit,
            "offset": offset,
            "has_more": offset + len(rows) < total,
            "contacts": [contact(row) for row in rows],
        }
    if path == f"{PREFIX}/contacts" and method == "POST":
        data = json.loads(body)
        email = data["email"].strip().lower()
        async with TRANSACTION(POOL, schema) as conn:
            matched = await conn.fetchrow(SELECT_MATCH_FOR_UPDATE, email, None)
            if matched is not None:
                return 200, {"status": "success", "created": False, "contact_id": matched["id"]}
            values: dict[str, Any] = dict.fromkeys(STORED)
            values.update(
                name=data.get("name") or email,
                first_name=data.get("first_name"),
                last_name=data.get("last_name"),
                email=email,
                tags=[],
                lead_source="inbound_webhook",
                custom_field_values={},
            )
            created = await conn.fetchval(INSERT_CONTACT, *(values[name] for name in STORED))
            # The service keeps a contact.created event in the same transaction (and queues it
            # to every subscription that wants it): the same work here.
            await emit_created(conn, uuid.UUID(hex=schema[2:]), created)
        return 201, {"status": "success", "created": True, "contact_id": created}
    if path.startswith(f"{PREFIX}/contacts/") and method == "GET":
        contact_id = uuid.UUID(path.rsplit("/", 1)[1])
        async with TRANSACTION(POOL, schema) as conn:
            row = await conn.fetchrow(SELECT_CONTACT, contact_id)
        if row is None:
            return 404, {"status": "error", "error": {"code": "not_found", "message": "no"}}
        return 200, {"status": "success", "contact": contact(row)}
    return 404, {"status": "error", "error": {"code": "not_found", "message": "no route"}}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global POOL
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                POOL = await create_pool(os.environ["DATABASE_URL"], min_size=2, max_size=20)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await POOL.close()  # type: ignore[union-attr]
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = dict(scope["headers"])
    principal = await PRINCIPALS.resolve(POOL, headers.get(b"x-api-key", b"").decode())  # type: ignore[arg-type]
    if principal is None or principal.schema is None:
        status, payload = (
            401,
            {"status": "error", "error": {"code": "invalid_api_key", "message": "no"}},
        )
    else:
        status, payload = await handle(
            scope["method"], scope["path"], scope["query_string"].decode(), principal.schema, body
        )
    encoded = json.dumps(payload, default=_default).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(encoded)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": encoded})


def main() -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from tenancy import prefork

    port, workers = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1
    child = sys.argv[3:4] == ["--prefork-child"]
    if workers > 1 and not child:
        command = ["-m", "bench.contacts.baseline", str(port), str(workers), "--prefork-child"]
        prefork.run(command, "127.0.0.1", port, workers, grace_seconds=10)
        return
    config = Config()
    # As `switchboard serve --workers`: each child on its own socket of the SO_REUSEPORT group.
    config.bind = (
        [f"fd://{prefork.listen('127.0.0.1', port).detach()}"] if child else [f"127.0.0.1:{port}"]
    )
    config.accesslog = None
    asyncio.run(serve(app, config))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
