"""The asyncpg pool and the two ways to use it: control transactions and tenant transactions.

Tenant SQL never names a schema. `tenant_transaction` points `search_path` at the tenant's schema,
names the tenant in the transaction's `switchboard.sub_account_id` setting (the one row-level
security policies read, CONTRACT 18) and runs the rest of the transaction as TENANT_ROLE, a role
that owns nothing and cannot bypass those policies: all with SET LOCAL, so it dies with the
transaction and a pooled connection can never carry one tenant into the next request.
`search_path_sql` is the only place that writes those statements.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from tenancy import jsonenc
from tenancy.errors import not_found

if TYPE_CHECKING:
    import sqlalchemy

T = TypeVar("T")
SCHEMA_NAME = re.compile(r"^t_[0-9a-f]{32}$")
# The role tenant statements run under, and the transaction-local setting naming the tenant;
# both are created and granted by control migration c0012 (docs/operations.md, "Row security").
TENANT_ROLE = "switchboard_tenant"
TENANT_SETTING = "switchboard.sub_account_id"


def schema_name_for(sub_account_id: Any) -> str:
    return f"t_{sub_account_id.hex}"


def _json_dumps(value: Any) -> str:
    return jsonenc.dumps(value, whole_decimal_as_int=True)


async def _init_connection(conn: asyncpg.Connection) -> None:
    for kind in ("json", "jsonb"):
        # Read with the standard library: orjson reads an integer past 64 bits as a float.
        await conn.set_type_codec(
            kind, encoder=_json_dumps, decoder=json.loads, schema="pg_catalog"
        )


def asyncpg_dsn(url: str) -> str:
    """Accept SQLAlchemy-style URLs (postgresql+asyncpg://) as well as plain ones."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url)


def session_url(url: str) -> str:
    """The URL for work that needs a PostgreSQL session of its own (LISTEN, session advisory
    locks, migrations): SWITCHBOARD_DIRECT_DATABASE_URL when set, because `url` may be PgBouncer
    in transaction mode, which hands each transaction to any server connection."""
    from tenancy.settings import get_settings

    return get_settings().direct_database_url or url


class PooledConnection(asyncpg.Connection):  # type: ignore[misc]
    """Released without the session reset query (one round trip saved per checkout).

    Safe because no pooled connection ever holds session state: tenant switching is SET LOCAL,
    LISTEN and advisory locks use connections of their own, and an open transaction is always
    rolled back on release by asyncpg itself.

    It also counts the tenant schemas its server backend has worked in. PostgreSQL caches the
    catalog entries of every relation a backend touches and never evicts them (about 100 KiB
    per tenant schema, bench/RESULTS.md "Scale"), so a connection that has served its budget of
    distinct tenants (`tenant_budget`, SWITCHBOARD_DB_CONNECTION_MAX_TENANTS) is closed once
    its transaction ends, and the pool opens a fresh one: memory per backend stays bounded.
    """

    tenant_budget = 0  # distinct tenant schemas before replacement; 0: never replaced

    def get_reset_query(self) -> str:
        return ""

    def serve_tenant(self, schema: str) -> bool:
        """Count `schema` among the tenants this connection has served; True when their number
        has reached the budget (close the connection when its transaction is over)."""
        if not self.tenant_budget:
            return False
        served: set[str] = self.__dict__.setdefault("_served_tenants", set())
        served.add(schema)
        return len(served) >= self.tenant_budget

    def tenants_served(self) -> int:
        return len(self.__dict__.get("_served_tenants", ()))


def serve_tenant(conn: asyncpg.Connection, schema: str) -> bool:
    """`PooledConnection.serve_tenant` for any connection (a plain one is never replaced)."""
    serve = getattr(conn, "serve_tenant", None)
    return bool(serve(schema)) if serve is not None else False


async def retire(conn: asyncpg.Connection) -> None:
    """Close a pooled connection that has served its budget of tenants, between transactions
    (the caller's transaction has ended): the pool opens a new one in its place when needed."""
    if conn.is_closed():
        return
    if conn.is_in_transaction():
        conn.terminate()  # only on an error path: asyncpg would roll it back on release anyway
        return
    try:
        await conn.close(timeout=5)
    except Exception:
        conn.terminate()


async def create_pool(url: str, *, min_size: int = 2, max_size: int = 20) -> asyncpg.Pool:
    from tenancy.settings import get_settings

    settings = get_settings()

    async def init(conn: asyncpg.Connection) -> None:
        conn.tenant_budget = settings.db_connection_max_tenants
        await _init_connection(conn)

    pool = await asyncpg.create_pool(
        asyncpg_dsn(url),
        min_size=min_size,
        max_size=max_size,
        init=init,
        command_timeout=60,
        statement_cache_size=settings.db_statement_cache_size,
        connection_class=PooledConnection,
        max_inactive_connection_lifetime=settings.db_connection_max_idle_seconds,
    )
    assert pool is not None
    return pool


async def fetch_one_or_404(
    conn: asyncpg.Connection | asyncpg.Pool, query: str, *args: Any, what: str
) -> asyncpg.Record:
    """The query's one row; 404 `not_found` ("<what> not found") when there is none."""
    row = await conn.fetchrow(query, *args)
    if row is None:
        raise not_found(what)
    return row


async def fetch_page(
    conn: asyncpg.Connection | asyncpg.Pool,
    query: str,
    count_query: str,
    *args: Any,
    count_args: tuple[Any, ...] = (),
) -> tuple[list[dict[str, Any]], int]:
    """A page from a query that carries `count(*) OVER () AS total`, and that total; the count
    query runs only when the page is empty (past the end), where the window has no row."""
    rows = await conn.fetch(query, *args)
    if not rows:
        return [], int(await conn.fetchval(count_query, *count_args))
    items = [{key: row[key] for key in row.keys() if key != "total"} for row in rows]
    return items, int(rows[0]["total"])


def where_clause(conditions: list[tuple[str, Any]], first: int = 1) -> tuple[str, list[Any]]:
    """`WHERE a AND b` from fixed SQL fragments whose value is not None, and their values.

    Each fragment names its value `$?` (as often as it needs it), or, when the value is a tuple,
    one `$?` per item in order; the values are numbered from `first`. Only fragments written in
    the code reach the SQL: values are parameters.
    """
    parts: list[str] = []
    values: list[Any] = []
    for fragment, value in conditions:
        if value is None:
            continue
        if isinstance(value, tuple):
            for item in value:
                values.append(item)
                fragment = fragment.replace("$?", f"${first + len(values) - 1}", 1)
        else:
            values.append(value)
            fragment = fragment.replace("$?", f"${first + len(values) - 1}")
        parts.append(fragment)
    return ("WHERE " + " AND ".join(parts) if parts else ""), values


async def fetch_newest_page(
    conn: asyncpg.Connection,
    table: str,
    columns: str,
    conditions: list[tuple[str, Any]],
    limit: int,
    offset: int,
) -> tuple[list[dict[str, Any]], int]:
    """A page of `table` newest first (created_at, id), filtered by the `where_clause`
    conditions, and the filtered total. `table` and `columns` are constants of the caller."""
    where, values = where_clause(conditions)
    page = f"LIMIT ${len(values) + 1} OFFSET ${len(values) + 2}"
    query = (
        f"SELECT {columns}, count(*) OVER () AS total FROM {table} {where} "
        f"ORDER BY created_at DESC, id DESC {page}"
    )
    return await fetch_page(
        conn,
        query,
        f"SELECT count(*) FROM {table} {where}",
        *values,
        limit,
        offset,
        count_args=tuple(values),
    )


# --- retrying after a schema change -----------------------------------------------------------
#
# asyncpg caches prepared statements per connection, keyed by their text. After `switchboard
# migrate` changes a tenant's tables, a cached statement whose result shape changed fails once
# with InvalidCachedStatementError (asyncpg then forgets every cached statement of the pool).
# Outside a transaction asyncpg re-prepares and retries by itself; inside one the transaction is
# aborted, so the unit to retry is the transaction, or the work that holds it: a request or a
# job. That is safe only while none of its transactions has committed, which `CommitTracker`
# tells. A retry starts each tenant transaction with the connection's statements forgotten: by
# the time it runs, other requests may have prepared the same text again on that connection for a
# tenant of the other shape (with some tenants migrated and some not), and it would fail the same
# way (CI on fe7b31d: a GET failed three times in a row; with two attempts, 6 of 10 runs failed).
STALE_STATEMENT_ERRORS = (
    asyncpg.InvalidCachedStatementError,
    asyncpg.exceptions.OutdatedSchemaCacheError,
)
# Two transactions that lock the same rows in another order, or a serializable transaction that
# lost to another: PostgreSQL rolls one back, and running that work again is the remedy
# (CONTRACT 18a: no request answers 500 for a race). Retried like a stale statement.
RACE_ERRORS = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
RETRIED_ERRORS = STALE_STATEMENT_ERRORS + RACE_ERRORS
STALE_STATEMENT_ATTEMPTS = 3


class CommitTracker:
    """Counts the transactions committed by the work it was started for, and says whether that
    work is a retry (its tenant transactions then prepare every statement afresh)."""

    def __init__(self, retrying: bool = False) -> None:
        self.committed = 0
        self.retrying = retrying


_tracker: ContextVar[CommitTracker | None] = ContextVar("switchboard_commits", default=None)


def _committed() -> None:
    tracker = _tracker.get()
    if tracker is not None:
        tracker.committed += 1


async def _prepare_afresh_when_retrying(conn: asyncpg.Connection) -> None:
    tracker = _tracker.get()
    if tracker is not None and tracker.retrying:
        # Held by this work until it ends, the connection cannot cache a stale shape again.
        await conn.reload_schema_state()


async def retry_stale_statements(
    work: Callable[[], Awaitable[T]], *, on_retry: Callable[[Exception], None] | None = None
) -> T:
    """Run `work`, and run it again (up to STALE_STATEMENT_ATTEMPTS in all) when a statement
    cached before a schema change, a deadlock or a serialization failure fails it before
    anything of it committed. After a race it waits a few random milliseconds first, so the
    two sides do not meet again in step."""
    attempt = 1
    stale = False
    while True:
        tracker = CommitTracker(retrying=stale)
        token = _tracker.set(tracker)
        try:
            return await work()
        except RETRIED_ERRORS as exc:
            if tracker.committed or attempt >= STALE_STATEMENT_ATTEMPTS:
                raise
            if on_retry is not None:
                on_retry(exc)
            attempt += 1
            stale = stale or isinstance(exc, STALE_STATEMENT_ERRORS)
            if isinstance(exc, RACE_ERRORS):
                await asyncio.sleep(random.uniform(0.005, 0.05))
        finally:
            _tracker.reset(token)


@asynccontextmanager
async def control_transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    async with pool.acquire() as conn, conn.transaction():
        yield conn
    _committed()


# --- the one place that switches search_path -------------------------------------------------
#
# tests/core/test_code_rules.py fails when a search_path switch is written anywhere else.


def search_path_sql(schema: str) -> str:
    """The statements that point the current transaction at a tenant schema (then `public`, for
    extensions) and name its sub-account in TENANT_SETTING, which the row-level security
    policies of the tenant tables read. SET LOCAL: both end with the transaction, so a pooled
    connection never carries a tenant into the next one. An identifier cannot be a bind
    parameter; the name is checked against SCHEMA_NAME, and the id is its hex, so both are safe
    to write in."""
    if not SCHEMA_NAME.fullmatch(schema):
        raise ValueError("not a tenant schema name")
    return f"SET LOCAL search_path TO {schema}, public; " + tenant_setting_sql(
        uuid.UUID(hex=schema[2:])
    )


def tenant_setting_sql(sub_account_id: uuid.UUID) -> str:
    """The statement that names `sub_account_id` in TENANT_SETTING for the transaction."""
    return f"SET LOCAL switchboard.sub_account_id TO '{uuid.UUID(str(sub_account_id))}'"


async def name_tenant(conn: asyncpg.Connection, sub_account_id: uuid.UUID) -> None:
    """Name `sub_account_id` as the tenant of the transaction `conn` is in, without switching
    its schema or role: control work on one tenant's shared rows (a purge) sees and changes
    them even when the control role is not exempt from row-level security."""
    await conn.execute(tenant_setting_sql(sub_account_id))


def tenant_role_sql() -> str:
    """The statement that runs the rest of the transaction as TENANT_ROLE: no superuser, owner
    of nothing, subject to every row-level security policy (CONTRACT 18)."""
    return f"SET LOCAL ROLE {TENANT_ROLE}"


async def set_search_path(conn: asyncpg.Connection, schema: str) -> None:
    """asyncpg: point the transaction `conn` is in at `schema`, under the connection's own
    role (control work on one tenant: provisioning, export, import; anything else uses
    `tenant_transaction`). The schema counts towards the connection's tenant budget: the next
    tenant transaction on it past the budget retires it."""
    await _prepare_afresh_when_retrying(conn)
    await conn.execute(search_path_sql(schema))
    serve_tenant(conn, schema)


def set_search_path_sync(connection: sqlalchemy.Connection, schema: str) -> None:
    """SQLAlchemy (alembic migrations): point the transaction `connection` is in at `schema`."""
    from sqlalchemy import text

    for statement in search_path_sql(schema).split("; "):
        connection.execute(text(statement))


@asynccontextmanager
async def tenant_transaction(pool: asyncpg.Pool, schema: str) -> AsyncIterator[asyncpg.Connection]:
    """A transaction whose unqualified table names resolve to one tenant's schema, run as
    TENANT_ROLE, so the database itself refuses every other tenant's rows."""
    switch = search_path_sql(schema) + "; " + tenant_role_sql()
    async with pool.acquire() as conn:
        await _prepare_afresh_when_retrying(conn)
        spent = serve_tenant(conn, schema)
        # BEGIN, the tenant and the role in one round trip.
        await conn.execute("BEGIN; " + switch)
        try:
            yield conn
        except BaseException:
            if not conn.is_closed() and conn.is_in_transaction():
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")
            if spent:
                await retire(conn)
            raise
        await conn.execute("COMMIT")
        _committed()
        if spent:
            await retire(conn)
