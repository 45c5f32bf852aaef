"""`switchboard tenants ...`: list, suspend and resume, delete and purge, export and import."""

from __future__ import annotations

import io
import json
import os
import stat
import uuid
from typing import Any

from arq import create_pool as create_arq_pool
from arq.connections import RedisSettings

from tenancy import tenant_ops
from tenancy.schema import tenant_head
from tenancy.tables import control_metadata
from tests.factories import WALLET, populate
from tests.helpers import printed_rows, schema_exists, switchboard


async def _status_of(client: Any, tenant: Any) -> int:
    return (await client.get(WALLET, headers=tenant.headers)).status_code


async def _expire_grace(pool: Any, sub_account_id: uuid.UUID) -> None:
    await pool.execute(
        "UPDATE control.sub_accounts SET purge_after = now() - interval '1 second' WHERE id = $1",
        sub_account_id,
    )


# --- list -------------------------------------------------------------------------------------


async def test_list_json_shows_schema_version_status_and_size(servers, tenant, tenant_second):
    done = switchboard(servers, "tenants", "list", "--json")
    assert done.returncode == 0, done.stderr
    listed = {row["id"]: row for row in json.loads(done.stdout)}
    row = listed[str(tenant.id)]
    assert row["schema_name"] == tenant.schema
    assert row["schema_version"] == tenant_head()
    assert row["status"] == "active"
    assert isinstance(row["size_bytes"], int) and row["size_bytes"] > 0
    assert row["organisation_id"] == str(tenant.organisation.id)
    assert str(tenant_second.id) in listed


async def test_list_filters_by_organisation_and_prints_a_table(servers, tenant, tenant_second):
    done = switchboard(servers, "tenants", "list", "--organisation", str(tenant.organisation.id))
    assert done.returncode == 0, done.stderr
    header, *lines = done.stdout.splitlines()
    assert header.split()[:5] == [
        "SUB_ACCOUNT_ID",
        "STATUS",
        "SCHEMA_VERSION",
        "SIZE_BYTES",
        "SCHEMA",
    ]
    assert [line.split()[0] for line in lines] == [str(tenant.id)]
    assert lines[0].split()[1:3] == ["active", tenant_head()]


# --- suspend, resume --------------------------------------------------------------------------


async def test_suspend_gives_401_and_resume_restores(servers, client, tenant, tenant_second):
    assert await _status_of(client, tenant) == 200
    done = switchboard(servers, "tenants", "suspend", str(tenant.id))
    assert done.returncode == 0, done.stderr
    assert f"sub-account {tenant.id}: suspended" in done.stdout

    response = await client.get(WALLET, headers=tenant.headers)
    assert response.status_code == 401
    assert (await response.get_json())["error"]["code"] == "invalid_api_key"
    assert await _status_of(client, tenant_second) == 200  # others are untouched

    done = switchboard(servers, "tenants", "resume", str(tenant.id))
    assert done.returncode == 0, done.stderr
    assert await _status_of(client, tenant) == 200


async def test_suspend_unknown_sub_account_exits_1_with_message(servers, migrated):
    unknown = uuid.uuid4()
    done = switchboard(servers, "tenants", "suspend", str(unknown))
    assert done.returncode == 1
    assert f"error: no sub-account {unknown}" in done.stderr


async def test_suspend_of_a_deleted_sub_account_is_refused(pool, tenant):
    await tenant_ops.delete(pool, tenant.id)
    try:
        await tenant_ops.suspend(pool, tenant.id)
    except tenant_ops.TenantOpError as exc:
        assert "resume it to undo the delete" in str(exc)
    else:
        raise AssertionError("suspend of a deleted sub-account was accepted")
    assert (
        await pool.fetchval("SELECT status FROM control.sub_accounts WHERE id = $1", tenant.id)
        == "deleted"
    )


# --- delete, purge ----------------------------------------------------------------------------


async def test_delete_stops_keys_at_once_and_purge_keeps_schema_within_grace(
    servers, client, pool, tenant
):
    done = switchboard(servers, "tenants", "delete", str(tenant.id), "--grace-days", "7")
    assert done.returncode == 0, done.stderr
    assert "deleted" in done.stdout and "purged after" in done.stdout
    assert await _status_of(client, tenant) == 401

    row = await pool.fetchrow(
        "SELECT status, deleted_at, purge_after - deleted_at AS grace "
        "FROM control.sub_accounts WHERE id = $1",
        tenant.id,
    )
    assert row["status"] == "deleted" and row["grace"].days == 7

    done = switchboard(servers, "tenants", "purge")
    assert done.returncode == 0, done.stderr
    assert str(tenant.id) not in done.stdout
    assert await schema_exists(pool, tenant.schema)


async def test_purge_after_grace_drops_schema_and_control_rows(servers, pool, tenant):
    await tenant_ops.delete(pool, tenant.id, grace_days=7)
    await _expire_grace(pool, tenant.id)

    done = switchboard(servers, "tenants", "purge")
    assert done.returncode == 0, done.stderr
    assert f"purged {tenant.id}" in done.stdout.splitlines()
    assert not await schema_exists(pool, tenant.schema)
    assert (
        await pool.fetchval("SELECT count(*) FROM control.sub_accounts WHERE id = $1", tenant.id)
        == 0
    )
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.api_keys WHERE sub_account_id = $1", tenant.id
        )
        == 0
    )


async def test_purge_cron_job_drops_deleted_tenants_past_grace(
    servers, pool, run_worker, tenant, tenant_second
):
    await tenant_ops.delete(pool, tenant.id, grace_days=0)
    await tenant_ops.delete(pool, tenant_second.id, grace_days=3)
    arq = await create_arq_pool(RedisSettings.from_dsn(servers.redis_url))
    try:
        job = await arq.enqueue_job("purge_deleted_tenants")
        await run_worker()
        assert await job.result(timeout=5) >= 1
    finally:
        await arq.aclose()
    assert not await schema_exists(pool, tenant.schema)
    assert await schema_exists(pool, tenant_second.schema)


async def test_resume_undoes_a_delete_before_the_purge(client, pool, tenant):
    await tenant_ops.delete(pool, tenant.id, grace_days=0)
    assert await _status_of(client, tenant) == 401
    change = await tenant_ops.resume(pool, tenant.id)
    assert change.changed and change.status == "active"
    report = await tenant_ops.purge_due(pool)
    assert tenant.id not in report.purged
    assert await _status_of(client, tenant) == 200
    row = await pool.fetchrow(
        "SELECT deleted_at, purge_after FROM control.sub_accounts WHERE id = $1", tenant.id
    )
    assert dict(row) == {"deleted_at": None, "purge_after": None}


async def test_deleting_again_keeps_the_first_purge_time(pool, tenant):
    first = await tenant_ops.delete(pool, tenant.id, grace_days=7)
    again = await tenant_ops.delete(pool, tenant.id, grace_days=1)
    assert not again.changed and again.purge_after == first.purge_after


async def test_negative_grace_period_is_refused(servers, pool, tenant):
    done = switchboard(servers, "tenants", "delete", str(tenant.id), "--grace-days=-1")
    assert done.returncode == 1 and "grace period cannot be negative" in done.stderr
    assert (
        await pool.fetchval("SELECT status FROM control.sub_accounts WHERE id = $1", tenant.id)
        == "active"
    )


# --- export, import ---------------------------------------------------------------------------


async def test_export_purge_import_round_trips_every_row_and_the_key_works_again(
    servers, client, pool, tmp_path
):
    # Given a sub-account with data, exported through the CLI.
    populated = await populate(client, pool)
    tenant = populated.tenant
    before = await printed_rows(pool, tenant)
    assert before["messages"] and before["wallet_transactions"] and before["control.users"]
    export = tmp_path / "tenant.jsonl"
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(export))
    assert done.returncode == 0, done.stderr
    # When it is deleted, purged, and imported again.
    await tenant_ops.delete(pool, tenant.id)
    await _expire_grace(pool, tenant.id)
    assert tenant.id in (await tenant_ops.purge_due(pool)).purged
    assert not await schema_exists(pool, tenant.schema)
    done = switchboard(servers, "tenants", "import", str(export))
    assert done.returncode == 0, done.stderr
    # Then every row is back as it was, and its key answers again.
    assert await printed_rows(pool, tenant) == before
    response = await client.get(WALLET, headers=tenant.headers)
    assert response.status_code == 200
    assert (await response.get_json())["wallet"]["balance"] == 13.0
    listed = await client.get("/webhooks/inbound/webhook-subscriptions", headers=tenant.headers)
    assert [s["url"] for s in (await listed.get_json())["subscriptions"]] == [
        "https://hooks.example.com/in"
    ]
    # The identity sequence goes on after the imported rows.
    from tenancy.db import tenant_transaction

    async with tenant_transaction(pool, tenant.schema) as conn:
        conversation = await conn.fetchval("SELECT id FROM conversations")
        seq = await conn.fetchval(
            "INSERT INTO messages (conversation_id, direction, sender_type, message_type, "
            "content, status) VALUES ($1, 'outbound', 'user', 'sms', 'later', 'sent') "
            "RETURNING seq",
            conversation,
        )
        assert seq > await conn.fetchval("SELECT max(seq) FROM messages WHERE content <> 'later'")


async def test_export_file_is_owner_only_with_header_and_trailer(servers, tenant, tmp_path):
    export = tmp_path / "tenant.jsonl"
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(export))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(export).st_mode) == 0o600
    lines = [json.loads(line) for line in export.read_text().splitlines()]
    assert lines[0]["format"] == "switchboard-tenant-export"
    assert lines[0]["schema_version"] == tenant_head()
    assert lines[0]["sub_account_id"] == str(tenant.id)
    assert lines[-1] == {"end": True, "rows": len(lines) - 2, "recordings": 0}
    tables = [line["table"] for line in lines[1:-1]]
    assert tables.index("control.sub_accounts") < tables.index("wallet")
    keys = [line["row"] for line in lines if line.get("table") == "control.api_keys"]
    assert keys and all("key_hash" in key and tenant.key not in json.dumps(key) for key in keys)


async def _exported(pool: Any, sub_account_id: uuid.UUID) -> list[str]:
    out = io.StringIO()
    await tenant_ops.export_tenant(pool, sub_account_id, out)
    return out.getvalue().splitlines(keepends=True)


async def _purge(pool: Any, sub_account_id: uuid.UUID) -> None:
    await tenant_ops.delete(pool, sub_account_id)
    await _expire_grace(pool, sub_account_id)
    assert sub_account_id in (await tenant_ops.purge_due(pool)).purged


async def _refused(pool: Any, lines: list[str], message: str) -> None:
    try:
        await tenant_ops.import_tenant(pool, lines)
    except tenant_ops.TenantOpError as exc:
        assert message in str(exc), str(exc)
    else:
        raise AssertionError("the import was accepted")


async def test_import_of_another_schema_version_is_refused(servers, pool, tenant, tmp_path):
    lines = await _exported(pool, tenant.id)
    await _purge(pool, tenant.id)
    header = json.loads(lines[0])
    header["schema_version"] = "t0000_old"
    (tmp_path / "old.jsonl").write_text(json.dumps(header) + "\n" + "".join(lines[1:]))

    done = switchboard(servers, "tenants", "import", str(tmp_path / "old.jsonl"))
    assert done.returncode == 1
    assert (
        f"revision t0000_old but this installation's tenant head is {tenant_head()}" in done.stderr
    )
    assert not await schema_exists(pool, tenant.schema)
    assert (
        await pool.fetchval("SELECT count(*) FROM control.sub_accounts WHERE id = $1", tenant.id)
        == 0
    )


async def test_import_without_the_organisation_is_refused(pool, tenant):
    lines = await _exported(pool, tenant.id)
    await _purge(pool, tenant.id)
    await pool.execute("DELETE FROM control.organisations WHERE id = $1", tenant.organisation.id)
    await _refused(pool, lines, f"organisation {tenant.organisation.id} does not exist here")
    assert not await schema_exists(pool, tenant.schema)


async def test_import_of_an_existing_sub_account_is_refused(pool, tenant):
    lines = await _exported(pool, tenant.id)
    await _refused(pool, lines, "already exists here")


async def test_import_of_a_truncated_file_is_refused_and_writes_nothing(pool, tenant):
    lines = await _exported(pool, tenant.id)
    await _purge(pool, tenant.id)
    await _refused(pool, lines[:-1], "the export is truncated")
    assert not await schema_exists(pool, tenant.schema)
    assert (
        await pool.fetchval("SELECT count(*) FROM control.sub_accounts WHERE id = $1", tenant.id)
        == 0
    )


async def test_import_refuses_rows_of_another_sub_account(pool, tenant, tenant_second):
    lines = await _exported(pool, tenant.id)
    await _purge(pool, tenant.id)
    forged = []
    for line in lines:
        item = json.loads(line)
        if item.get("table") == "control.api_keys":
            item["row"]["sub_account_id"] = str(tenant_second.id)
            line = json.dumps(item) + "\n"
        forged.append(line)
    await _refused(pool, forged, "belong to another sub-account")
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.api_keys WHERE sub_account_id = $1", tenant_second.id
        )
        == 1
    )


async def test_import_maps_members_to_an_existing_user_with_the_same_email(client, pool):
    # Given an export, and a database where the member's email belongs to another user id.
    populated = await populate(client, pool)
    tenant = populated.tenant
    lines = await _exported(pool, tenant.id)
    await _purge(pool, tenant.id)
    email = await pool.fetchval(
        "SELECT email FROM control.users WHERE id = $1", populated.owner_user_id
    )
    await pool.execute("DELETE FROM control.users WHERE id = $1", populated.owner_user_id)
    existing = await pool.fetchval(
        "INSERT INTO control.users (email) VALUES ($1) RETURNING id", email
    )
    # When it is imported.
    report = await tenant_ops.import_tenant(pool, lines)
    # Then the membership points at the user who is here, and the plan is kept.
    assert report.users_matched == 1 and not report.plan_dropped
    assert (
        await pool.fetchval(
            "SELECT user_id FROM control.memberships WHERE sub_account_id = $1", tenant.id
        )
        == existing
    )
    assert (
        await pool.fetchval(
            "SELECT p.slug FROM control.sub_accounts AS s"
            " JOIN control.plans AS p ON p.id = s.plan_id WHERE s.id = $1",
            tenant.id,
        )
        == populated.plan_slug
    )


async def test_importing_a_deleted_sub_account_brings_it_back_active(client, pool, tenant):
    await tenant_ops.delete(pool, tenant.id)
    lines = await _exported(pool, tenant.id)
    await _expire_grace(pool, tenant.id)
    await tenant_ops.purge_due(pool)
    await tenant_ops.import_tenant(pool, lines)
    assert await _status_of(client, tenant) == 200


# --- the control migration --------------------------------------------------------------------


async def test_control_check_constraints_match_metadata(pool):
    # alembic's autogenerate compares no CHECK constraints: c0004 widened one by hand.
    stored = {
        (row["table"], row["name"]): row["definition"]
        for row in await pool.fetch(
            "SELECT c.relname AS table, k.conname AS name, pg_get_constraintdef(k.oid) AS "
            "definition FROM pg_constraint AS k JOIN pg_class AS c ON c.oid = k.conrelid "
            "WHERE k.contype = 'c' AND c.relnamespace = 'control'::regnamespace"
        )
    }
    expected = {
        (table.name, constraint.name)
        for table in control_metadata.tables.values()
        for constraint in table.constraints
        if constraint.__class__.__name__ == "CheckConstraint"
    }
    assert set(stored) == expected
    assert "'deleted'" in stored[("sub_accounts", "ck_sub_accounts_status")]


async def test_import_claims_its_numbers_and_refuses_one_held_elsewhere(
    client, pool, tenant, tenant_second, worker
):
    from tests.factories import import_number

    await import_number(client, tenant, "+14155550174")
    lines = await _exported(pool, tenant.id)
    await _purge(pool, tenant.id)
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.phone_number_directory "
            "WHERE phone_number = '+14155550174'"
        )
        == 0
    )
    held = await import_number(client, tenant_second, "+14155550174")
    await _refused(pool, lines, "+14155550174 are held by another sub-account")
    assert not await schema_exists(pool, tenant.schema)
    response = await client.delete(
        f"/webhooks/inbound/phone-numbers/{held}", headers=tenant_second.headers
    )
    assert response.status_code == 200
    await tenant_ops.import_tenant(pool, lines)
    assert (
        await pool.fetchval(
            "SELECT sub_account_id FROM control.phone_number_directory "
            "WHERE phone_number = '+14155550174'"
        )
        == tenant.id
    )
