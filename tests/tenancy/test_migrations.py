"""Migrations match the metadata, new schemas are created at head, and `migrate` fans out safely."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, pool, text

from tenancy.migrate import migrate_tenants, tenants_behind
from tenancy.schema import (
    MIGRATIONS_DIR,
    alembic_config,
    sqlalchemy_url,
    tenant_head,
)
from tenancy.tables import control_metadata, tenant_metadata
from tests.factories import make_tenant

# Alembic cannot compare indexes on expressions (it reports each as removed and added); the
# catalog test below compares their definitions as PostgreSQL holds them, for both build paths.
EXPRESSION_INDEXES = {"ix_contacts_text_bigrams", "ix_contacts_phone_bigrams"}


def _compared(obj: Any, name: str | None, kind: str, reflected: bool, other: Any) -> bool:
    return not (
        (kind == "table" and name == "alembic_version")
        or (kind == "index" and name in EXPRESSION_INDEXES)
    )


def _diff(url: str, schema: str, metadata: Any, **options: Any) -> list[Any]:
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.connect() as conn:
        conn.execute(
            text("SELECT set_config('search_path', :p, false)"), {"p": f'"{schema}", public'}
        )
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_object": _compared,
                **options,
            },
        )
        diff = compare_metadata(context, metadata)
    engine.dispose()
    return diff


def test_control_migrations_match_metadata(migrated: str) -> None:
    diff = _diff(
        migrated,
        "control",
        control_metadata,
        include_schemas=True,
        include_name=lambda name, kind, parents: kind != "schema" or name == "control",
    )
    assert diff == []


def _replayed_schema(url: str) -> str:
    from alembic import command

    schema = f"t_{uuid.uuid4().hex}"
    cfg = alembic_config("tenant", url)
    cfg.attributes["schema"] = schema
    command.upgrade(cfg, "head")
    return schema


def test_tenant_migrations_replayed_match_metadata(migrated: str) -> None:
    schema = _replayed_schema(migrated)
    try:
        assert _diff(migrated, schema, tenant_metadata) == []
    finally:
        _drop_schema(migrated, schema)


CATALOG = """
SELECT 'constraint' AS kind, c.conrelid::regclass::text AS tbl, c.conname AS name,
       pg_get_constraintdef(c.oid) AS definition
FROM pg_constraint AS c JOIN pg_namespace AS n ON n.oid = c.connamespace
WHERE n.nspname = :s
UNION ALL
SELECT 'index', tablename, indexname, replace(indexdef, :s || '.', '')
FROM pg_indexes WHERE schemaname = :s
"""


def _catalog(url: str, schema: str) -> set[tuple[str, str, str, str]]:
    rows = _sql(url, CATALOG, s=schema)
    return {
        (kind, table.split(".")[-1], name, definition.replace(f"{schema}.", ""))
        for kind, table, name, definition in rows
    }


async def test_replayed_migrations_and_fresh_tenant_ddl_build_the_same_catalog(
    client, agency, migrated
) -> None:
    """Alembic does not compare CHECK constraints; the two build paths must still agree."""
    tenant = await make_tenant(client, agency)
    schema = _replayed_schema(migrated)
    try:
        fresh = _catalog(migrated, tenant.schema) - {
            row for row in _catalog(migrated, tenant.schema) if row[1] == "alembic_version"
        }
        replayed = {row for row in _catalog(migrated, schema) if row[1] != "alembic_version"}
        assert fresh == replayed
    finally:
        _drop_schema(migrated, schema)


async def test_new_tenant_schema_is_created_at_head_matching_metadata(
    client, agency, migrated
) -> None:
    tenant = await make_tenant(client, agency)
    assert _diff(migrated, tenant.schema, tenant_metadata) == []
    engine = create_engine(sqlalchemy_url(migrated), poolclass=pool.NullPool)
    with engine.connect() as conn:
        version = conn.execute(text(f'SELECT version_num FROM "{tenant.schema}".alembic_version'))
        recorded = conn.execute(
            text("SELECT schema_version FROM control.sub_accounts WHERE id = :id"),
            {"id": tenant.id},
        )
        assert version.scalar_one() == tenant_head() == recorded.scalar_one()
    engine.dispose()


def _drop_schema(url: str, schema: str) -> None:
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def _sql(url: str, statement: str, **params: Any) -> Any:
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.begin() as conn:
        result = conn.execute(text(statement), params)
        rows = result.all() if result.returns_rows else None
    engine.dispose()
    return rows


NEW_MIGRATION = '''"""trivial: a note column on the wallet"""
import sqlalchemy as sa
from alembic import op

revision = "t9999"
down_revision = {head!r}
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("wallet", sa.Column("note", sa.Text()))


def downgrade() -> None:
    op.drop_column("wallet", "note")
'''


@pytest.fixture
async def three_tenants(client, agency, migrated):
    tenants = [await make_tenant(client, agency) for _ in range(3)]
    yield tenants
    for tenant in tenants:
        _drop_schema(migrated, tenant.schema)
        _sql(migrated, "DELETE FROM control.sub_accounts WHERE id = :id", id=tenant.id)


def test_migrate_applies_a_new_migration_and_isolates_a_broken_tenant(
    three_tenants, migrated, tmp_path: Path
) -> None:
    scripts = tmp_path / "tenant"
    shutil.copytree(MIGRATIONS_DIR / "tenant", scripts)
    (scripts / "versions" / "2099_01_01_t9999_trivial.py").write_text(
        NEW_MIGRATION.format(head=tenant_head())
    )
    healthy_a, broken, healthy_b = three_tenants
    _sql(migrated, f'DROP TABLE "{broken.schema}".wallet_transactions')
    _sql(migrated, f'ALTER TABLE "{broken.schema}".wallet RENAME TO wallet_gone')
    ids = [t.id for t in three_tenants]

    report = migrate_tenants(migrated, concurrency=2, only=ids, script_location=scripts)

    assert report.head == "t9999"
    assert sorted(report.migrated) == sorted([healthy_a.id, healthy_b.id])
    assert list(report.failed) == [broken.id]
    assert "wallet" in report.failed[broken.id]
    for tenant in (healthy_a, healthy_b):
        columns = _sql(
            migrated,
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = :s AND table_name = 'wallet'",
            s=tenant.schema,
        )
        assert ("note",) in columns
    # The failed tenant was rolled back whole and is still behind: a re-run picks up only it.
    assert _sql(migrated, f'SELECT version_num FROM "{broken.schema}".alembic_version') == [
        (tenant_head(),)
    ]
    assert [sid for sid, _ in tenants_behind(migrated, "t9999", ids)] == [broken.id]

    _sql(migrated, f'ALTER TABLE "{broken.schema}".wallet_gone RENAME TO wallet')
    again = migrate_tenants(migrated, concurrency=2, only=ids, script_location=scripts)
    assert again.migrated == [broken.id] and again.ok
    assert migrate_tenants(migrated, only=ids, script_location=scripts).total == 0


def _cli_env(servers) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis_url}


def test_migrate_cli_reports_each_failure_and_exits_1_then_resumes(
    three_tenants, migrated, servers
) -> None:
    healthy_a, broken, healthy_b = three_tenants
    # Two tenants never migrated (empty schemas), one whose history was lost but tables kept:
    # replaying its first migration must fail on the existing tables.
    for tenant in (healthy_a, healthy_b):
        _drop_schema(migrated, tenant.schema)
        _sql(migrated, f'CREATE SCHEMA "{tenant.schema}"')
    _sql(migrated, f'DELETE FROM "{broken.schema}".alembic_version')
    _sql(
        migrated,
        "UPDATE control.sub_accounts SET schema_version = NULL WHERE id = ANY(:ids)",
        ids=[t.id for t in three_tenants],
    )
    command = [sys.executable, "-m", "cli", "migrate", "--concurrency", "2"]

    first = subprocess.run(
        command,
        env=_cli_env(servers),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )

    assert first.returncode == 1, first.stderr
    failure_lines = [line for line in first.stderr.splitlines() if line.startswith("FAILED")]
    assert len(failure_lines) == 1 and str(broken.id) in failure_lines[0]
    assert "migrated 2 of 3" in first.stderr
    for tenant in (healthy_a, healthy_b):
        assert _sql(migrated, f'SELECT version_num FROM "{tenant.schema}".alembic_version') == [
            (tenant_head(),)
        ]

    _drop_schema(migrated, broken.schema)
    _sql(migrated, f'CREATE SCHEMA "{broken.schema}"')
    second = subprocess.run(
        command,
        env=_cli_env(servers),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert second.returncode == 0, second.stderr
    assert "migrated 1 of 1" in second.stderr

    third = subprocess.run(
        command,
        env=_cli_env(servers),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert third.returncode == 0 and "all tenant schemas at head" in third.stderr


async def test_pg_trgm_is_set_up_once_in_public_and_used_by_tenant_indexes(
    client, agency, migrated
) -> None:
    tenant = await make_tenant(client, agency)
    where = _sql(
        migrated,
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n "
        "ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'",
    )
    assert where == [("public",)]
    indexes = _sql(
        migrated,
        "SELECT indexname FROM pg_indexes WHERE schemaname = :s "
        "AND indexdef LIKE '%gin_trgm_ops%' ORDER BY indexname",
        s=tenant.schema,
    )
    assert [row[0] for row in indexes] == [
        "ix_contacts_email_trgm",
        "ix_contacts_name_trgm",
        "ix_contacts_phone_trgm",
    ]
