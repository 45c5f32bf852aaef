"""No secret reaches a log: a realistic slice of the system runs as `switchboard serve` and
`switchboard worker` with JSON logs, and every value that must stay secret is looked for in all
they wrote. Keys are stored as a keyed hash and looked up by it."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from api.agents.sample import create_agent_body
from tenancy.keys import hash_key
from tenancy.secrets import encrypt
from tests.factories import Tenant
from tests.helpers import live_system
from tests.receiver import RecordingReceiver

BASE = "/webhooks/inbound"
PEPPER = "pepper-" + secrets.token_hex(24)


def _agent_body(organisation_id: str, sub_account_id: str) -> dict[str, Any]:
    return create_agent_body(
        organisation_id, sub_account_id, name="Secret agent", backcchanneling=True, recording=True
    )


def _create_organisation(env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "create-organisation",
            "--name",
            f"Secrets {uuid.uuid4().hex[:6]}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    created: dict[str, str] = json.loads(done.stdout)
    # The key is shown once, on stdout, by design; nowhere else.
    assert created["agency_api_key"] not in done.stderr
    return created


async def _wait(condition: Any, what: str) -> None:
    async with asyncio.timeout(60):
        while not condition():  # noqa: ASYNC110  (another process does the work)
            await asyncio.sleep(0.1)


def _invitation_tokens(mailbox: Any, address: str) -> list[str]:
    tokens = []
    for message in mailbox.to(address):
        text = message.get_payload(decode=True)
        if text is None:  # multipart
            text = b"".join(part.get_payload(decode=True) or b"" for part in message.walk())
        tokens += re.findall(r"Invitation token: (\S+)", text.decode(errors="replace"))
    return tokens


async def test_no_secret_appears_in_the_output_of_serve_and_worker(
    servers: Any, mailbox: Any, migrated: str, tmp_path: Path
) -> None:
    import os

    env_extra = {
        "SWITCHBOARD_LOG_FORMAT": "json",
        "SWITCHBOARD_KEY_PEPPER": PEPPER,
        "SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS": "true",
        "SWITCHBOARD_WEBHOOK_RETRY_SCALE": "0.001",
    }
    env = {
        **os.environ,
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
        "SMTP_HOST": mailbox.host,
        "SMTP_PORT": str(mailbox.port),
        **env_extra,
    }
    found: set[str] = {PEPPER}
    receiver = await RecordingReceiver().start()
    receiver.statuses = [500, 503]  # two failed attempts first: retries are logged too
    try:
        with live_system(servers, mailbox, tmp_path, **env_extra) as live:
            found |= await _exercise(live.base_url, env, servers, mailbox, receiver)
            output = live.output()
    finally:
        assert receiver.server is not None
        receiver.server.close()
        await receiver.server.wait_closed()

    assert '"level"' in output, "expected JSON logs from serve and worker"
    leaked = sorted(value for value in found if value in output)
    assert not leaked, f"secrets in the logs: {leaked}"
    # Nor the secret part of any key-shaped value at all.
    assert not re.search(r"sb_[A-Za-z0-9_\-]{20,}", output)
    assert not re.search(r"whsec_[A-Za-z0-9+/=]{20,}", output)


async def _exercise(
    base: str, env: dict[str, str], servers: Any, mailbox: Any, receiver: RecordingReceiver
) -> set[str]:
    """Drive the system the way clients do; answer every secret value produced or sent."""
    found: set[str] = set()
    organisation = await asyncio.to_thread(_create_organisation, env)
    failing = await asyncio.to_thread(_create_organisation, env)
    agency_key, failing_key = organisation["agency_api_key"], failing["agency_api_key"]
    found |= {agency_key, failing_key}
    smtp_password = "smtp-" + secrets.token_hex(16)
    found.add(smtp_password)
    conn = await asyncpg.connect(servers.direct_url)  # not PgBouncer: a named statement
    try:
        # The failing organisation's own SMTP server wants a login ours cannot give.
        await conn.execute(
            "INSERT INTO control.email_configs (organisation_id, host, port, username, password,"
            " from_address) VALUES ($1, $2, $3, $4, $5, $6)",
            uuid.UUID(failing["organisation_id"]),
            mailbox.host,
            mailbox.port,
            "smtp-user@example.com",
            encrypt(smtp_password),
            "noreply@example.com",
        )
    finally:
        await conn.close()

    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        agency = {"x-api-key": agency_key}
        owner = f"owner-{uuid.uuid4().hex[:8]}@example.com"
        created = (
            await http.post(
                "/functions/v1/create-subaccount-webhook",
                headers=agency,
                json={"email": owner, "name": "Secret shop"},
            )
        ).json()
        assert created["success"] is True, created
        sub_account_id = created["sub_account_id"]
        found |= set(_invitation_tokens(mailbox, owner))

        keys = []
        for _ in range(2):
            answer = await http.post(
                f"/functions/v1/agency/sub-accounts/{sub_account_id}/api-keys", headers=agency
            )
            assert answer.status_code == 201, answer.text
            keys.append(answer.json()["api_key"])
        found |= set(keys)
        tenant = {"x-api-key": keys[0]}

        # An LLM provider key, and an agent with its webhook secret.
        llm_key = "sk-" + secrets.token_hex(24)
        found.add(llm_key)
        answer = await http.put(
            f"{BASE}/integrations/openai", json={"api_key": llm_key}, headers=tenant
        )
        assert answer.status_code == 200, answer.text
        answer = await http.post(
            "/functions/v1/crm-api/create-agent",
            headers=tenant,
            json=_agent_body(organisation["organisation_id"], sub_account_id),
        )
        assert answer.status_code == 201, answer.text
        agent = (await http.get(f"{BASE}/agents/{answer.json()['id']}", headers=tenant)).json()
        found.add(agent["agent"]["webhook_secret"] if "agent" in agent else agent["webhook_secret"])

        # A tool: its signing secret, and a header value a refused change echoes nowhere.
        header_value = "Bearer tool-" + secrets.token_hex(16)
        found.add(header_value)
        answer = await http.post(
            f"{BASE}/tools",
            headers=tenant,
            json={
                "name": "lookup",
                "type": "http",
                "description": "Look things up.",
                "config": {"url": receiver.url, "headers": {"Authorization": header_value}},
            },
        )
        assert answer.status_code == 201, answer.text
        found.add(answer.json()["tool"]["secret"])
        refused = await http.patch(
            f"{BASE}/tools/{answer.json()['tool']['id']}",
            headers=tenant,
            json={
                "config": {
                    "url": receiver.url,
                    "timeout_seconds": 99,
                    "headers": {"Authorization": header_value},
                }
            },
        )
        assert refused.status_code == 400 and header_value not in refused.text, refused.text

        # A webhook subscription, and an event delivered to it (after two failed attempts).
        answer = await http.post(
            f"{BASE}/webhook-subscriptions",
            headers=tenant,
            json={"url": receiver.url, "events": ["contact.updated"]},
        )
        assert answer.status_code == 201, answer.text
        found.add(answer.json()["subscription"]["secret"])
        # A target whose URL carries credentials, as many webhook receivers' URLs do.
        password, token = "hookpass" + secrets.token_hex(8), "hooktoken" + secrets.token_hex(8)
        found |= {password, token}
        port = receiver.url.split(":")[2].split("/")[0]
        answer = await http.post(
            f"{BASE}/webhook-subscriptions",
            headers=tenant,
            json={
                "url": f"http://hookuser:{password}@127.0.0.1:{port}/hook?token={token}",
                "events": ["contact.updated"],
            },
        )
        assert answer.status_code in (201, 400), answer.text
        deliveries = 4 if answer.status_code == 201 else 3
        contact = (
            await http.post(
                f"{BASE}/contacts",
                headers=tenant,
                json={"email": f"c-{uuid.uuid4().hex[:8]}@example.com"},
            )
        ).json()["contact_id"]
        answer = await http.post(
            f"{BASE}/contacts/{contact}/tags",
            json={"tags": ["vip"]},
            headers={"x-api-key": keys[1]},
        )
        assert answer.status_code == 200, answer.text
        await _wait(lambda: len(receiver.requests) >= deliveries, "webhook delivery")

        # An invitation that is emailed, and one whose email fails (502 keeps the token).
        member = f"member-{uuid.uuid4().hex[:8]}@example.com"
        answer = await http.post(
            "/functions/v1/crm-api/add-subaccount-user",
            headers=agency,
            json={"email": member, "role": "sub_account_user", "sub_account_id": sub_account_id},
        )
        assert answer.status_code == 201, answer.text
        found |= set(_invitation_tokens(mailbox, member))
        failing_shop = (
            await http.post(
                "/functions/v1/create-subaccount-webhook",
                headers={"x-api-key": failing_key},
                json={"email": f"o-{uuid.uuid4().hex[:8]}@example.com", "name": "Failing"},
            )
        ).json()
        if "invitation_token" in failing_shop:
            found.add(failing_shop["invitation_token"])
        answer = await http.post(
            "/functions/v1/crm-api/add-subaccount-user",
            headers={"x-api-key": failing_key},
            json={
                "email": f"m-{uuid.uuid4().hex[:8]}@example.com",
                "role": "sub_account_user",
                "sub_account_id": failing_shop["sub_account_id"],
            },
        )
        assert answer.status_code == 502, answer.text
        found.add(answer.json()["invitation_token"])

        # Wrong keys that clients send must not be logged either.
        wrong = ["sb_" + secrets.token_urlsafe(32), "not-a-key-" + secrets.token_hex(8)]
        found |= set(wrong)
        for value in wrong:
            for headers in ({"x-api-key": value}, {"Authorization": f"Bearer {value}"}):
                assert (await http.get(f"{BASE}/contacts", headers=headers)).status_code == 401
        # A key in a body (a client's mistake) and a failing server error path.
        assert (
            await http.post(
                f"{BASE}/contacts", headers=tenant, json={"email": "bad", "address": keys[1]}
            )
        ).status_code in (201, 400)
    return found


async def test_no_secret_appears_in_the_in_process_logs(
    client: Any, tenant: Tenant, mailbox: Any, pool: Any, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    found = {tenant.key, tenant.organisation.key}
    llm_key = "sk-" + secrets.token_hex(24)
    found.add(llm_key)
    response = await client.put(
        f"{BASE}/integrations/anthropic", json={"api_key": llm_key}, headers=tenant.headers
    )
    assert response.status_code == 200
    listed = await client.get(f"{BASE}/integrations", headers=tenant.headers)
    assert listed.status_code == 200 and llm_key not in await listed.get_data(as_text=True)
    response = await client.post(
        f"{BASE}/webhook-subscriptions",
        headers=tenant.headers,
        json={"url": "http://127.0.0.1:9/hook", "events": ["contact.updated"]},
    )
    found.add((await response.get_json())["subscription"]["secret"])
    response = await client.post(
        f"/functions/v1/agency/sub-accounts/{tenant.id}/api-keys",
        headers=tenant.organisation.headers,
    )
    found.add((await response.get_json())["api_key"])
    wrong = "sb_" + secrets.token_urlsafe(32)
    found.add(wrong)
    assert (await client.get(f"{BASE}/contacts", headers={"x-api-key": wrong})).status_code == 401
    text = caplog.text + "\n".join(repr(record.__dict__) for record in caplog.records)
    assert not sorted(value for value in found if value in text)


# --- keys at rest -----------------------------------------------------------------------------


async def test_keys_are_stored_only_as_a_keyed_digest_and_a_short_prefix(
    client: Any, pool: Any, tenant: Tenant
) -> None:
    rows = await pool.fetch("SELECT * FROM control.api_keys WHERE sub_account_id = $1", tenant.id)
    (row,) = rows
    assert row["key_hash"] == hash_key(tenant.key)
    assert len(row["key_hash"]) == 32
    assert len(row["prefix"]) <= 12 and tenant.key.startswith(row["prefix"])
    # No column holds the key, or more of it than the prefix.
    for name, value in dict(row).items():
        if isinstance(value, str) and name != "prefix":
            assert tenant.key[:12] not in value, name
    # The hash is keyed: the plain SHA-256 of the key is not what is stored.
    import hashlib

    assert row["key_hash"] != hashlib.sha256(tenant.key.encode()).digest()


async def test_a_key_is_found_by_its_digest_and_nothing_else(
    client: Any, pool: Any, tenant: Tenant
) -> None:
    from tenancy.principals import principal_for_key

    found = await principal_for_key(pool, tenant.key)
    assert found is not None and found.sub_account_id == tenant.id
    # A key of the same prefix and length that differs in its last character: unknown.
    twisted = tenant.key[:-1] + ("A" if tenant.key[-1] != "A" else "B")
    assert await principal_for_key(pool, twisted) is None
    # The stored digest itself, or the prefix, presented as a key: unknown.
    row = await pool.fetchrow(
        "SELECT key_hash, prefix FROM control.api_keys WHERE sub_account_id = $1", tenant.id
    )
    assert await principal_for_key(pool, "sb_" + row["key_hash"].hex()) is None
    assert await principal_for_key(pool, row["prefix"]) is None
    for key in (twisted, row["prefix"], tenant.key.upper()):
        response = await client.get(f"{BASE}/contacts", headers={"x-api-key": key})
        assert response.status_code == 401
