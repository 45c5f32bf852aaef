"""Alembic environment of one tenant schema, for the `alembic` command line and checks.

`switchboard migrate` does not come through here: it drives the same scripts per schema itself
(tenancy/migrate.py). From the command line: `alembic -c ... -x schema=t_<hex> upgrade head`.
"""

from alembic import context
from sqlalchemy import create_engine, pool, text

from tenancy.db import SCHEMA_NAME, set_search_path_sync
from tenancy.tables import tenant_metadata

config = context.config


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    return not (type_ == "table" and name == "alembic_version")


def run_migrations_online() -> None:
    schema = context.get_x_argument(as_dictionary=True).get("schema") or config.attributes["schema"]
    if not SCHEMA_NAME.match(schema):
        raise SystemExit(f"not a tenant schema: {schema!r}")
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection, schema)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn, schema)
        conn.commit()


def _run(connection, schema: str) -> None:  # type: ignore[no-untyped-def]
    connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    # Local to the migration's transaction (one, committed by the caller): nothing is left on
    # the session, which may be a pooled server connection.
    set_search_path_sync(connection, schema)
    context.configure(
        connection=connection,
        target_metadata=tenant_metadata,
        version_table_schema=schema,
        include_object=include_object,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
