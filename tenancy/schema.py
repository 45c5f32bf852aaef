"""Tenant schemas: their names, the alembic head they are at, and creating one at head at once.

A new sub-account's schema is created from the compiled DDL of `tenant_metadata` in the
provisioning transaction and stamped at the tenant head: no migration history is replayed in a
request. Tests prove that replaying the migrations yields the same schema as this DDL.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import asyncpg
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from tenancy.db import SCHEMA_NAME, set_search_path
from tenancy.tables import tenant_metadata


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


@lru_cache
def tenant_ddl() -> str:
    """All CREATE TABLE / CREATE INDEX statements of the tenant schema, as one script."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy leaves it untyped
    statements: list[str] = []
    for table in tenant_metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        for index in sorted(table.indexes, key=lambda i: i.name or ""):
            statements.append(str(CreateIndex(index).compile(dialect=dialect)).strip())
    statements.append(
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
        "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
    )
    return ";\n".join(statements) + ";"


async def create_tenant_schema(conn: asyncpg.Connection, schema: str) -> str:
    """Create `schema` at the tenant head inside the caller's transaction; return the head.

    The transaction's search_path is left on the new schema, so the caller can go on to fill it.
    """
    if not SCHEMA_NAME.fullmatch(schema):
        raise ValueError("not a tenant schema name")
    head = tenant_head()
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await set_search_path(conn, schema)
    await conn.execute(tenant_ddl())
    await conn.execute("INSERT INTO alembic_version (version_num) VALUES ($1)", head)
    return head
