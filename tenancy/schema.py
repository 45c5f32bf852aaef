"""Tenant schemas: their names, the alembic head they are at, and creating one at head at once.

A tenant schema holds one view per table of `tenant_metadata` over the shared tables of
`tenant_data` (tenancy/tables/shared.py), limited to its sub-account. A new sub-account's schema
is created from those views in the provisioning transaction and stamped at the tenant head: no
migration history is replayed in a request. Tests prove that replaying the migrations yields the
same schema.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import asyncpg
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from tenancy.db import SCHEMA_NAME, TENANT_ROLE, name_tenant, set_search_path
from tenancy.tables import shared_metadata, tenant_metadata
from tenancy.tables.shared import SHARED_SCHEMA, SUB_ACCOUNT


def _migrations_dir() -> Path:
    # Found, not imported: the migrations sit above tenancy in the layers (they read its tables).
    spec = importlib.util.find_spec("migrations")
    if spec is None or spec.origin is None:
        raise RuntimeError("the migrations package is not installed")
    return Path(spec.origin).resolve().parent


MIGRATIONS_DIR = _migrations_dir()


def alembic_config(
    which: str, url: str | None = None, script_location: Path | None = None
) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location or MIGRATIONS_DIR / which))
    cfg.set_main_option("file_template", "%%(year)d_%%(month).2d_%%(day).2d_%%(rev)s_%%(slug)s")
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return cfg


def sqlalchemy_url(url: str) -> str:
    """The psycopg flavour of a PostgreSQL URL, for alembic."""
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme.startswith("postgres") else url


def head_revision(which: str, script_location: Path | None = None) -> str:
    script = ScriptDirectory.from_config(alembic_config(which, script_location=script_location))
    head = script.get_current_head()
    assert head is not None, f"no {which} migrations"
    return head


@lru_cache
def tenant_head() -> str:
    return head_revision("tenant")


def table_ddl(metadata: MetaData) -> list[str]:
    """The CREATE TABLE / CREATE INDEX statements of `metadata`'s tables, parents first."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy leaves it untyped
    statements: list[str] = []
    for table in metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        for index in sorted(table.indexes, key=lambda i: i.name or ""):
            statements.append(str(CreateIndex(index).compile(dialect=dialect)).strip())
    return statements


def tenant_columns() -> dict[str, list[str]]:
    """Each tenant table's columns as its view shows them (parents first)."""
    return {
        table.name: [column.name for column in table.columns]
        for table in tenant_metadata.sorted_tables
    }


def _key(sub_account_id: uuid.UUID) -> str:
    return f"'{uuid.UUID(str(sub_account_id))}'::uuid"  # a uuid: safe to write in


def identity_defaults(table: str) -> list[str]:
    """The view `table`'s default for each identity column of its shared table: that column's
    sequence, named outright. Without it, PostgreSQL finds an identity column's sequence for an
    INSERT through a view by scanning pg_depend for everything that depends on the column, which
    is every sub-account's view of it: 10,000 index entries read each time an INSERT is planned
    for another sub-account (bench/RESULTS.md, session 16)."""
    return [
        f'ALTER VIEW "{table}" ALTER COLUMN "{column}" '
        f"SET DEFAULT nextval('{SHARED_SCHEMA}.{table}_{column}_seq'::regclass)"
        for identity_table, column in _identity_columns()
        if identity_table == table
    ]


def _create_view(
    key: str, table: str, select_list: str, with_identities: bool, row_security: bool = True
) -> list[str]:
    # security_invoker: the shared table's row-level security judges the role that queries the
    # view (the tenant role), not the view's owner (CONTRACT 18).
    # Set after the check option, in the order t0020 left the views' options in.
    invoker = [f'ALTER VIEW "{table}" SET (security_invoker = true)'] if row_security else []
    return [
        f'CREATE VIEW "{table}" AS SELECT {select_list} FROM {SHARED_SCHEMA}."{table}" '
        f"WHERE {SUB_ACCOUNT} = {key} WITH CASCADED CHECK OPTION",
        *invoker,
        f'ALTER VIEW "{table}" ALTER COLUMN {SUB_ACCOUNT} SET DEFAULT {key}',
        *(identity_defaults(table) if with_identities else ()),
        *(
            (f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}" TO {TENANT_ROLE}',)
            if row_security
            else ()
        ),
    ]


def view_ddl(
    sub_account_id: uuid.UUID,
    columns: Mapping[str, Sequence[str]],
    *,
    with_identities: bool = True,
    row_security: bool = True,
) -> str:
    """One view per table in the current schema: the shared table's rows of `sub_account_id`
    (docs/decisions.md). Automatically updatable, so tenant SQL reads and writes it as a table;
    the check option refuses a row of another sub-account and `sub_account_id` defaults to its
    own, so no tenant statement names it but an `ON CONFLICT` target. `with_identities`: the
    views' identity defaults too (t0018 made its views without them; t0019 added them).
    `row_security`: the views `security_invoker` and granted to the tenant role (t0020 made
    them so)."""
    key = _key(sub_account_id)
    statements = []
    for table, names in columns.items():
        listed = ", ".join(f'"{name}"' for name in (SUB_ACCOUNT, *names))
        statements.extend(_create_view(key, table, listed, with_identities, row_security))
    return ";\n".join(statements) + ";"


def replace_view_sql(
    sub_account_id: uuid.UUID,
    table: str,
    columns: Sequence[str],
    *,
    shown_as: Mapping[str, str] | None = None,
    then_rows: Sequence[str] = (),
) -> str:
    """A tenant migration's change to one view of the current schema: `columns` in order, each
    the shared table's column of that name or the column `shown_as[name]` under that name.

    The view is locked first, and only then do `then_rows` (statements on its sub-account's rows,
    such as moving values to a new column) run: a request that holds the view and waits for one of
    those rows would otherwise deadlock with the migration waiting for the view."""
    shown_as = shown_as or {}
    listed = ", ".join(
        f'"{shown_as[name]}" AS "{name}"' if name in shown_as else f'"{name}"'
        for name in (SUB_ACCOUNT, *columns)
    )
    statements = [
        f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE',
        *then_rows,
        f'DROP VIEW "{table}"',
        *_create_view(_key(sub_account_id), table, listed, with_identities=True),
    ]
    return ";\n".join(statements) + ";"


VERSION_TABLE = (
    "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
    "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
)


# Sub-accounts move or import rows side by side: one at a time moves a shared sequence.
LOCK_SEQUENCES = "SELECT pg_advisory_xact_lock(hashtext('tenant_data identity sequences'))"


def _identity_columns() -> list[tuple[str, str]]:
    return [
        (table.name, column.name)
        for table in shared_metadata.sorted_tables
        for column in table.columns
        if column.identity is not None
    ]


async def advance_shared_sequences(conn: asyncpg.Connection, sub_account_id: uuid.UUID) -> None:
    """After rows with their own identity values came in (an import), each shared identity
    sequence goes past the largest of them, so the sub-account's next ones keep growing."""
    await conn.execute(LOCK_SEQUENCES)
    for table, column in _identity_columns():
        await conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{SHARED_SCHEMA}.{table}', '{column}'), "
            f'greatest(max("{column}"), (SELECT last_value FROM '
            f"{SHARED_SCHEMA}.{table}_{column}_seq))) "
            f'FROM {SHARED_SCHEMA}."{table}" WHERE {SUB_ACCOUNT} = $1',
            sub_account_id,
        )


def shared_row_deletes(parameter: str = "$1") -> list[str]:
    """The statements that delete every row of the sub-account bound to `parameter` from the
    shared tables (its schema's views show nothing more), the tables that refer to others
    first."""
    return [
        f'DELETE FROM {SHARED_SCHEMA}."{table.name}" WHERE {SUB_ACCOUNT} = {parameter}'
        for table in reversed(shared_metadata.sorted_tables)
    ]


async def delete_shared_rows(conn: asyncpg.Connection, sub_account_id: uuid.UUID) -> None:
    """Every row of `sub_account_id` in the shared tables."""
    await name_tenant(conn, sub_account_id)
    for statement in shared_row_deletes():
        await conn.execute(statement, sub_account_id)


def sub_account_of(schema: str) -> uuid.UUID:
    """The sub-account whose tenant schema `schema` is (`t_<its id in hex>`)."""
    if not SCHEMA_NAME.fullmatch(schema):
        raise ValueError("not a tenant schema name")
    return uuid.UUID(hex=schema[2:])


async def create_tenant_schema(conn: asyncpg.Connection, schema: str) -> str:
    """Create `schema` at the tenant head inside the caller's transaction; return the head.

    The transaction's search_path is left on the new schema, so the caller can go on to fill it.
    """
    if not SCHEMA_NAME.fullmatch(schema):
        raise ValueError("not a tenant schema name")
    head = tenant_head()
    await conn.execute(
        f'CREATE SCHEMA "{schema}"; GRANT USAGE ON SCHEMA "{schema}" TO {TENANT_ROLE}'
    )
    await set_search_path(conn, schema)
    await conn.execute(view_ddl(sub_account_of(schema), tenant_columns()) + VERSION_TABLE)
    await conn.execute("INSERT INTO alembic_version (version_num) VALUES ($1)", head)
    return head
