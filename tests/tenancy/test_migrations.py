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
    shared_row_deletes,
    sqlalchemy_url,
    sub_account_of,
    tenant_head,
)
from tenancy.tables import control_metadata, shared_metadata, tenant_metadata
from tenancy.tables.shared import SHARED_SCHEMA
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


def test_shared_tables_match_their_metadata(migrated: str) -> None:
    """tenant_data (control revision c0011 on) holds the tables tenancy/tables/shared.py
    derives from the tenant metadata."""
    diff = _diff(
        migrated,
        SHARED_SCHEMA,
        shared_metadata,
        include_schemas=True,
        include_name=lambda name, kind, parents: kind != "schema" or name == SHARED_SCHEMA,
    )
    assert diff == []


def _replayed_schema(url: str) -> str:
    from alembic import command

    schema = f"t_{uuid.uuid4().hex}"
    cfg = alembic_config("tenant", url)
    cfg.attributes["schema"] = schema
    command.upgrade(cfg, "head")
    return schema


VIEWS = """
SELECT c.relname, c.relkind::text, array_agg(a.attname::text ORDER BY a.attnum) AS columns
FROM pg_class AS c
JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = to_regnamespace(:s) AND c.relname NOT LIKE 'alembic\_version%'
GROUP BY c.relname, c.relkind
"""


def _views(url: str, schema: str) -> dict[str, tuple[str, list[str]]]:
    return {name: (kind, columns) for name, kind, columns in _sql(url, VIEWS, s=schema)}


def _expected_views() -> dict[str, tuple[str, list[str]]]:
    return {
        table.name: ("v", ["sub_account_id", *(column.name for column in table.columns)])
        for table in tenant_metadata.sorted_tables
    }


def test_tenant_migrations_replayed_make_one_view_per_table(migrated: str) -> None:
    schema = _replayed_schema(migrated)
    try:
        assert _views(migrated, schema) == _expected_views()
    finally:
        _drop_schema(migrated, schema)


# Each view's definition, options and column defaults, the sub-account written as `X`.
CATALOG = """
SELECT c.relname, pg_get_viewdef(c.oid), c.reloptions::text,
       (SELECT string_agg(a.attname || '=' || pg_get_expr(d.adbin, d.adrelid), ',')
        FROM pg_attrdef AS d JOIN pg_attribute AS a ON a.attrelid = d.adrelid
             AND a.attnum = d.adnum
        WHERE d.adrelid = c.oid)
FROM pg_class AS c WHERE c.relnamespace = to_regnamespace(:s) AND c.relkind = 'v'
"""


def _catalog(url: str, schema: str) -> set[tuple[str, ...]]:
    sub_account = str(uuid.UUID(hex=schema[2:]))
    return {
        tuple(str(value).replace(sub_account, "X") for value in row)
        for row in _sql(url, CATALOG, s=schema)
    }


async def test_replayed_migrations_and_fresh_tenant_ddl_build_the_same_catalog(
    client, agency, migrated
) -> None:
    """The views a new sub-account gets are the ones the migrations build, to the letter."""
    tenant = await make_tenant(client, agency)
    schema = _replayed_schema(migrated)
    try:
        fresh = _catalog(migrated, tenant.schema)
        assert len(fresh) == len(tenant_metadata.tables)
        assert fresh == _catalog(migrated, schema)
    finally:
        _drop_schema(migrated, schema)


async def test_views_name_the_sequence_of_each_identity_column(client, agency, migrated) -> None:
    """An INSERT through a view that left an identity column to the base table would make
    PostgreSQL scan every sub-account's view of that column in pg_depend for its sequence."""
    tenant = await make_tenant(client, agency)
    identities = {
        (table.name, column.name)
        for table in shared_metadata.sorted_tables
        for column in table.columns
        if column.identity is not None
    }
    rows = _sql(
        migrated,
        "SELECT c.relname, a.attname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef AS d "
        "JOIN pg_attribute AS a ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
        "JOIN pg_class AS c ON c.oid = d.adrelid "
        "WHERE c.relnamespace = to_regnamespace(:s) AND a.attname <> 'sub_account_id'",
        s=tenant.schema,
    )
    assert identities == {("events", "position"), ("messages", "seq")}
    assert {(table, column): default for table, column, default in rows} == {
        (table, column): f"nextval('{SHARED_SCHEMA}.{table}_{column}_seq'::regclass)"
        for table, column in identities
    }


async def test_new_tenant_schema_is_created_at_head_matching_metadata(
    client, agency, migrated
) -> None:
    tenant = await make_tenant(client, agency)
    assert _views(migrated, tenant.schema) == _expected_views()
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
    """The tenant schema and its sub-account's rows in the shared tables."""
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        for statement in shared_row_deletes(":id"):
            conn.execute(text(statement), {"id": sub_account_of(schema)})
    engine.dispose()


def _sql(url: str, statement: str, **params: Any) -> Any:
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.begin() as conn:
        result = conn.execute(text(statement), params)
        rows = result.all() if result.returns_rows else None
    engine.dispose()
    return rows


NEW_MIGRATION = '''"""trivial: a note on the wallet view"""
from alembic import op

revision = "t9999"
down_revision = {head!r}
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("COMMENT ON VIEW wallet IS 'note'")


def downgrade() -> None:
    op.execute("COMMENT ON VIEW wallet IS NULL")
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
    _sql(migrated, f'DROP VIEW "{broken.schema}".wallet_transactions')
    _sql(migrated, f'ALTER VIEW "{broken.schema}".wallet RENAME TO wallet_gone')
    ids = [t.id for t in three_tenants]

    report = migrate_tenants(migrated, concurrency=2, only=ids, script_location=scripts)

    assert report.head == "t9999"
    assert sorted(report.migrated) == sorted([healthy_a.id, healthy_b.id])
    assert list(report.failed) == [broken.id]
    assert "wallet" in report.failed[broken.id]
    for tenant in (healthy_a, healthy_b):
        comment = _sql(
            migrated,
            "SELECT obj_description(to_regclass(:t), 'pg_class')",
            t=f'"{tenant.schema}".wallet',
        )
        assert comment == [("note",)]
    # The failed tenant was rolled back whole and is still behind: a re-run picks up only it.
    assert _sql(migrated, f'SELECT version_num FROM "{broken.schema}".alembic_version') == [
        (tenant_head(),)
    ]
    assert [sid for sid, _ in tenants_behind(migrated, "t9999", ids)] == [broken.id]

    _sql(migrated, f'ALTER VIEW "{broken.schema}".wallet_gone RENAME TO wallet')
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


def test_pg_trgm_is_set_up_once_in_public_and_used_by_the_shared_indexes(migrated) -> None:
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
        s=SHARED_SCHEMA,
    )
    assert [row[0] for row in indexes] == [
        "ix_contacts_email_trgm",
        "ix_contacts_name_trgm",
        "ix_contacts_phone_trgm",
    ]
