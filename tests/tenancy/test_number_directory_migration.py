"""Migration c0008 builds the platform-wide number directory from every tenant's active numbers."""

from __future__ import annotations

import uuid

import asyncpg
from alembic import command

from tenancy.schema import alembic_config
from tests.conftest import _with_database

TENANT_NUMBERS = """
CREATE SCHEMA "{schema}";
CREATE TABLE "{schema}".phone_numbers (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), phone_number text NOT NULL,
    is_active boolean NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
"""


async def _sub_account(
    conn: asyncpg.Connection, organisation_id: uuid.UUID, numbers: list[tuple[str, bool]]
) -> tuple[uuid.UUID, dict[str, uuid.UUID]]:
    sub_account_id = uuid.uuid4()
    schema = f"t_{sub_account_id.hex}"
    await conn.execute(
        "INSERT INTO control.sub_accounts (id, organisation_id, name, slug, schema_name) "
        "VALUES ($1, $2, 'x', $3, $4)",
        sub_account_id,
        organisation_id,
        schema,
        schema,
    )
    await conn.execute(TENANT_NUMBERS.format(schema=schema))
    ids = {}
    for number, active in numbers:
        ids[number] = await conn.fetchval(
            f'INSERT INTO "{schema}".phone_numbers (phone_number, is_active) VALUES ($1, $2) '
            "RETURNING id",
            number,
            active,
        )
    return sub_account_id, ids


async def test_c0008_backfills_active_numbers_the_older_sub_account_keeping_a_shared_one(
    servers,
) -> None:
    database = f"scratch_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(servers.admin_url)
    await admin.execute(f'CREATE DATABASE "{database}"')
    url = _with_database(servers.admin_url, database)
    try:
        command.upgrade(alembic_config("control", url), "c0007")
        conn = await asyncpg.connect(url)
        try:
            organisation_id = await conn.fetchval(
                "INSERT INTO control.organisations (name, plan_type) "
                "VALUES ('o', 'standard') RETURNING id"
            )
            older, older_ids = await _sub_account(
                conn,
                organisation_id,
                [("+14155550101", True), ("+14155550102", False), ("+14155550103", True)],
            )
            newer, newer_ids = await _sub_account(
                conn, organisation_id, [("+14155550103", True), ("+14155550104", True)]
            )
            command.upgrade(alembic_config("control", url), "head")
            rows = await conn.fetch(
                "SELECT phone_number, sub_account_id, phone_number_id "
                "FROM control.phone_number_directory ORDER BY 1"
            )
        finally:
            await conn.close()
        assert [tuple(row) for row in rows] == [
            ("+14155550101", older, older_ids["+14155550101"]),
            ("+14155550103", older, older_ids["+14155550103"]),
            ("+14155550104", newer, newer_ids["+14155550104"]),
        ]
    finally:
        await admin.execute(f'DROP DATABASE "{database}" WITH (FORCE)')
        await admin.close()
