"""The database itself keeps tenants apart (CONTRACT 18): inside tenant A's transaction no
statement reaches tenant B's rows, whether it names `tenant_data.<table>` or B's own schema.

The tables come from the shared metadata, so a new tenant table is covered or fails: each test
seeds one row of B into every table first (as the test's own role, with foreign keys off, since
the row only needs to exist), then tries to read, insert, change and delete B's rows from A.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import asyncpg
import pytest

from tenancy.db import TENANT_ROLE, TENANT_SETTING, tenant_transaction
from tenancy.tables import shared_metadata
from tenancy.tables.shared import SHARED_SCHEMA, SUB_ACCOUNT

TABLES = sorted(table.name for table in shared_metadata.sorted_tables)

COLUMNS = """
SELECT a.attnum, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null,
       a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' AS has_default
FROM pg_attribute AS a
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

CHECKS = """
SELECT conname, pg_get_constraintdef(oid) AS definition
FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'
"""

# Values to try, in turn, for a NOT NULL column without a default (the foreign keys are off
# while the rows are seeded); a text column a check limits to a list tries that list's first.
CANDIDATES = {
    "uuid": ["gen_random_uuid()"],
    "text": ["'x'"],
    "character varying": ["'x'"],
    "integer": ["1"],
    "bigint": ["1"],
    "smallint": ["1"],
    "double precision": ["1"],
    "real": ["1"],
    "boolean": ["false", "true"],
    "jsonb": ["'{}'::jsonb", "'[]'::jsonb"],
    "json": ["'{}'::json", "'[]'::json"],
    "date": ["current_date"],
    "interval": ["'1 minute'::interval"],
    "bytea": ["'\\x00'::bytea"],
    "text[]": ["'{}'::text[]"],
    "uuid[]": ["'{}'::uuid[]"],
}


def _candidates(column: asyncpg.Record, checks: dict[str, str]) -> list[str]:
    kind = column["type"]
    if kind.startswith("numeric"):
        return ["0", "1"]
    if kind.startswith("timestamp"):
        # Later columns later: an end after its start.
        return [f"now() + interval '{column['attnum']} minutes'"]
    listed = []
    if kind in ("text", "character varying"):
        for definition in checks.values():
            if re.search(rf"\b{re.escape(column['name'])}\b", definition):
                listed += [
                    f"'{value}'"
                    for value in re.findall(r"'([^']*)'::(?:text|character varying)", definition)
                ][:1]
    return listed + CANDIDATES[kind]


async def _insert_sql(
    conn: asyncpg.Connection, table: str, into: str, sub_account_id: uuid.UUID | None
) -> str:
    """An INSERT of one row into `into` (the shared table or a view of it) that meets the
    table's NOT NULL and check constraints (found by trying, in a savepoint, as the test's own
    role); `sub_account_id` None leaves it to the view's default."""
    name = f'{SHARED_SCHEMA}."{table}"'
    checks = {row["conname"]: row["definition"] for row in await conn.fetch(CHECKS, name)}
    columns = [
        column
        for column in await conn.fetch(COLUMNS, name)
        if column["name"] != SUB_ACCOUNT and not column["has_default"]
    ]
    # A nullable column is left null unless a check asks for it (one of two columns set).
    options = {
        column["name"]: ([] if column["not_null"] else ["NULL"]) + _candidates(column, checks)
        for column in columns
    }
    chosen = dict.fromkeys(options, 0)

    def statement(target: str, sub: uuid.UUID | None) -> str:
        names = [f'"{column}"' for column in chosen]
        values = [options[column][index] for column, index in chosen.items()]
        if sub is not None:
            names.append(SUB_ACCOUNT)
            values.append(f"'{sub}'::uuid")
        if not names:
            return f"INSERT INTO {target} DEFAULT VALUES"
        return f"INSERT INTO {target} ({', '.join(names)}) VALUES ({', '.join(values)})"

    for _ in range(20):
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica")
                await conn.execute(statement(name, uuid.uuid4()))
                raise _Fits
        except _Fits:
            return statement(into, sub_account_id)
        except asyncpg.CheckViolationError as exc:
            definition = checks[exc.constraint_name]
            for column in chosen:
                if re.search(rf"\b{re.escape(column)}\b", definition):
                    chosen[column] = (chosen[column] + 1) % len(options[column])
    raise AssertionError(f"no row fits {table}'s checks: add candidates to the test")


class _Fits(Exception):
    """The trial row fitted: roll its savepoint back."""


async def _rows_of(conn: asyncpg.Connection, table: str, sub_account_id: uuid.UUID) -> list[str]:
    return [
        row[0]
        for row in await conn.fetch(
            f'SELECT t::text FROM {SHARED_SCHEMA}."{table}" AS t WHERE {SUB_ACCOUNT} = $1 '
            "ORDER BY 1",
            sub_account_id,
        )
    ]


async def _seed(pool: asyncpg.Pool, tables: list[str], sub_account_id: uuid.UUID) -> None:
    """One row of `sub_account_id` in each of `tables`, written as the test's role (a
    superuser, like the servers' owner here, is not held by the policies); replica mode skips
    the foreign keys a lone row does not meet."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        for table in tables:
            if not await _rows_of(conn, table, sub_account_id):
                shared = f'{SHARED_SCHEMA}."{table}"'
                await conn.execute(await _insert_sql(conn, table, shared, sub_account_id))


async def _affected(conn: asyncpg.Connection, statement: str, *args: Any) -> int | str:
    """The rows `statement` changed, or the error that refused it (in a savepoint, so a
    refusal leaves the tenant transaction usable)."""
    await conn.execute("SAVEPOINT probe")
    try:
        status = await conn.execute(statement, *args)
    except asyncpg.PostgresError as exc:
        await conn.execute("ROLLBACK TO SAVEPOINT probe")
        return type(exc).__name__
    await conn.execute("RELEASE SAVEPOINT probe")
    return int(status.split()[-1])


@pytest.mark.parametrize("table", TABLES)
async def test_a_tenant_transaction_reaches_no_other_tenants_rows(
    pool: asyncpg.Pool, tenant: Any, tenant_second: Any, table: str
) -> None:
    other = tenant_second.id
    shared = f'{SHARED_SCHEMA}."{table}"'
    view = f'"{tenant_second.schema}"."{table}"'
    await _seed(pool, [table], other)
    async with pool.acquire() as conn:
        before = await _rows_of(conn, table, other)
        inserts = [
            await _insert_sql(conn, table, shared, other),
            await _insert_sql(conn, table, view, None),
        ]
    assert before, f"{table} holds no row of the other tenant to try"

    async with tenant_transaction(pool, tenant.schema) as conn:
        seen = [
            await conn.fetchval(
                f"SELECT count(*) FROM {shared} WHERE {SUB_ACCOUNT} <> $1", tenant.id
            ),
            await conn.fetchval(f"SELECT count(*) FROM {view}"),
        ]
        changed = [
            await _affected(
                conn, f"UPDATE {shared} SET {SUB_ACCOUNT} = $1 WHERE {SUB_ACCOUNT} = $1", other
            ),
            await _affected(
                conn,
                f"UPDATE {shared} SET {SUB_ACCOUNT} = $1 WHERE {SUB_ACCOUNT} = $2",
                tenant.id,
                other,
            ),
            await _affected(conn, f"UPDATE {view} SET {SUB_ACCOUNT} = {SUB_ACCOUNT}"),
            await _affected(conn, f"DELETE FROM {shared} WHERE {SUB_ACCOUNT} = $1", other),
            await _affected(conn, f"DELETE FROM {view}"),
        ]
        inserted = [await _affected(conn, statement) for statement in inserts]

    assert seen == [0, 0]
    assert changed == [0] * len(changed)
    # Row-level security refuses the row before any other constraint is checked.
    assert inserted == ["InsufficientPrivilegeError"] * 2
    async with pool.acquire() as conn:
        assert await _rows_of(conn, table, other) == before


async def test_every_tenant_table_forces_its_policy_on_the_transactions_tenant(
    pool: asyncpg.Pool,
) -> None:
    rows = await pool.fetch(
        """
        SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
               array_agg(pg_get_expr(p.polqual, p.polrelid)) AS policies
        FROM pg_class AS c LEFT JOIN pg_policy AS p ON p.polrelid = c.oid
        WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'p')
        GROUP BY c.relname, c.relrowsecurity, c.relforcerowsecurity
        """,
        SHARED_SCHEMA,
    )

    assert sorted(row["relname"] for row in rows) == TABLES
    for row in rows:
        assert (row["relname"], row["relrowsecurity"], row["relforcerowsecurity"]) == (
            row["relname"],
            True,
            True,
        )
        assert len(row["policies"]) == 1 and TENANT_SETTING in row["policies"][0], row


async def test_the_tenant_role_owns_nothing_and_cannot_bypass_the_policies(
    pool: asyncpg.Pool,
) -> None:
    role = await pool.fetchrow(
        "SELECT rolsuper, rolbypassrls, rolcanlogin, rolcreaterole, rolcreatedb "
        "FROM pg_roles WHERE rolname = $1",
        TENANT_ROLE,
    )
    owned = await pool.fetchval(
        "SELECT count(*) FROM pg_class WHERE relowner = $1::regrole", TENANT_ROLE
    )

    assert dict(role) == {
        "rolsuper": False,
        "rolbypassrls": False,
        "rolcanlogin": False,
        "rolcreaterole": False,
        "rolcreatedb": False,
    }
    assert owned == 0


async def test_a_transaction_that_names_no_tenant_sees_and_writes_no_tenant_row(
    pool: asyncpg.Pool, tenant: Any
) -> None:
    await _seed(pool, ["contacts", "notes"], tenant.id)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL ROLE {TENANT_ROLE}")
        seen = await conn.fetchval(f'SELECT count(*) FROM {SHARED_SCHEMA}."contacts"')
        deleted = await _affected(conn, f'DELETE FROM {SHARED_SCHEMA}."notes"')

    assert (seen, deleted) == (0, 0)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT count(*) FROM control.api_keys",
        "SELECT count(*) FROM control.users",
        "SELECT count(*) FROM control.invitations",
        "SELECT count(*) FROM control.organisations",
        "SELECT count(*) FROM control.email_configs",
        "SELECT count(*) FROM control.idempotency_keys",
        "UPDATE control.sub_accounts SET name = 'x'",
    ],
)
async def test_a_tenant_transaction_cannot_touch_control_tables_of_the_platform(
    pool: asyncpg.Pool, tenant: Any, statement: str
) -> None:
    async with tenant_transaction(pool, tenant.schema) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(statement)


async def test_a_tenant_transaction_sees_only_its_own_control_rows(
    pool: asyncpg.Pool, tenant: Any, tenant_second: Any
) -> None:
    async with tenant_transaction(pool, tenant.schema) as conn:
        sub_accounts = await conn.fetch("SELECT id FROM control.sub_accounts")
        members = await conn.fetchval(
            "SELECT count(*) FROM control.memberships WHERE sub_account_id <> $1", tenant.id
        )
        due = await conn.fetchval(
            "SELECT count(*) FROM control.due_work WHERE sub_account_id <> $1", tenant.id
        )

    assert [row["id"] for row in sub_accounts] == [tenant.id]
    assert (members, due) == (0, 0)
