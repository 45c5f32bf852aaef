"""Alembic environment of the control schema (`switchboard migrate` runs it first)."""

from alembic import context
from sqlalchemy import create_engine, pool, text

from tenancy.tables import control_metadata
from tenancy.tables.base import CONTROL_SCHEMA

config = context.config


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    if type_ == "table" and getattr(obj, "schema", None) not in (CONTROL_SCHEMA, None):
        return False
    return not (type_ == "table" and name == "alembic_version")


def include_name(name, type_, parent_names):  # type: ignore[no-untyped-def]
    return name == CONTROL_SCHEMA if type_ == "schema" else True


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
        conn.commit()


# Every 2-character piece of a text, once each (null for null). Tenant indexes are built on it:
# its body must never change meaning (a new one needs a new name and new indexes).
BIGRAMS = """
CREATE OR REPLACE FUNCTION public.switchboard_bigrams(value text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT coalesce(array_agg(DISTINCT substr(value, i, 2)), '{}')
      FROM generate_series(1, length(value) - 1) AS i $$
"""


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {CONTROL_SCHEMA}"))
    # Database-wide set-up, done once here before any tenant is migrated or created: the
    # extensions tenant schemas use live in public (on every tenant search_path), never per
    # tenant. pg_trgm backs the contact search (tenant revision t0005), and BIGRAMS its
    # 2-character `q`, which has no trigram to look up (t0010).
    connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public"))
    connection.execute(text(BIGRAMS))
    context.configure(
        connection=connection,
        target_metadata=control_metadata,
        version_table_schema=CONTROL_SCHEMA,
        include_schemas=True,
        include_name=include_name,
        include_object=include_object,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
