"""Exports carry secrets encrypted under the exporting installation's SWITCHBOARD_SECRETS_KEY;
an import needs the same key, or `--reencrypt KEY_FILE` with the exporting key, which
re-encrypts them under the importing one (CONTRACT 9 "Secrets")."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from tenancy import tenant_ops
from tenancy.settings import get_settings
from tests.factories import agent_body, make_tool, populate
from tests.helpers import switchboard

BASE = "/webhooks/inbound"


async def _with_secrets(client: Any, pool: Any) -> tuple[Any, dict[str, str]]:
    populated = await populate(client, pool)
    tenant = populated.tenant
    llm_key = "sk-" + uuid.uuid4().hex
    response = await client.put(
        f"{BASE}/integrations/openai", json={"api_key": llm_key}, headers=tenant.headers
    )
    assert response.status_code == 200
    response = await client.post(
        f"{BASE}/webhook-subscriptions",
        headers=tenant.headers,
        json={"url": "https://hooks.example.com/two", "events": ["contact.updated"]},
    )
    secret = (await response.get_json())["subscription"]["secret"]
    response = await client.post(
        "/functions/v1/crm-api/create-agent", headers=tenant.headers, json=agent_body(tenant)
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    agent_id = (await response.get_json())["id"]
    shown = await client.get(f"{BASE}/agents/{agent_id}", headers=tenant.headers)
    # A tool holds two secrets: its signing secret and its header values.
    header = "Bearer " + uuid.uuid4().hex
    tool = await make_tool(
        client,
        tenant,
        config={"url": "https://tools.example.com/x", "headers": {"Authorization": header}},
    )
    return tenant, {
        "llm_key": llm_key,
        "secret": secret,
        "agent_id": agent_id,
        "agent_secret": (await shown.get_json())["agent"]["webhook_secret"],
        "tool_id": tool["id"],
        "tool_secret": tool["secret"],
        "tool_header": header,
    }


def _export(servers: Any, tenant: Any, folder: Path) -> Path:
    out = folder / f"{tenant.id}.jsonl"
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


async def _purge(pool: Any, sub_account_id: uuid.UUID) -> None:
    await tenant_ops.delete(pool, sub_account_id)
    await pool.execute(
        "UPDATE control.sub_accounts SET purge_after = now() - interval '1 second' WHERE id = $1",
        sub_account_id,
    )
    assert sub_account_id in (await tenant_ops.purge_due(pool)).purged


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


async def test_export_writes_secrets_encrypted_under_the_exporting_key(
    client, pool, servers, tmp_path
) -> None:
    tenant, found = await _with_secrets(client, pool)
    text = _export(servers, tenant, tmp_path).read_text()
    assert not [
        name
        for name, value in found.items()
        if value in text and name not in ("agent_id", "tool_id")
    ]
    lines = [json.loads(line) for line in text.splitlines()]
    first = Fernet((get_settings().secrets_key or "").split(",")[0])
    assert first.decrypt(lines[0]["secrets_key_check"].encode())
    stored = {
        line["table"]: line["row"]
        for line in lines[1:-1]
        if line["table"] in ("integrations", "webhook_subscriptions")
    }
    assert first.decrypt(stored["integrations"]["api_key"].encode()).decode() == found["llm_key"]


async def test_import_under_another_key_needs_reencrypt_with_the_exporting_key(
    client, pool, servers, tmp_path
) -> None:
    # Given an export made under this installation's key, and its sub-account gone.
    tenant, found = await _with_secrets(client, pool)
    export = _export(servers, tenant, tmp_path)
    await _purge(pool, tenant.id)
    exporting = get_settings().secrets_key or ""
    ours = Fernet.generate_key().decode()
    wrong, right = tmp_path / "wrong.key", tmp_path / "exporting.key"
    wrong.write_text(Fernet.generate_key().decode() + "\n")
    right.write_text(exporting + "\n")
    for key_file in (wrong, right):
        os.chmod(key_file, 0o600)

    # When another installation (another key) imports it without --reencrypt: refused.
    done = switchboard(
        servers, "tenants", "import", str(export), env={"SWITCHBOARD_SECRETS_KEY": ours}
    )
    assert done.returncode == 1
    assert "--reencrypt" in _one_error_line(done.stderr)
    # With the wrong key file: refused, nothing written.
    done = switchboard(
        servers,
        "tenants",
        "import",
        str(export),
        "--reencrypt",
        str(wrong),
        env={"SWITCHBOARD_SECRETS_KEY": ours},
    )
    assert done.returncode == 1
    assert "--reencrypt" in _one_error_line(done.stderr)
    assert (
        await pool.fetchval("SELECT count(*) FROM control.sub_accounts WHERE id = $1", tenant.id)
        == 0
    )
    # With the exporting key: imported, every secret now under our key alone.
    done = switchboard(
        servers,
        "tenants",
        "import",
        str(export),
        "--reencrypt",
        str(right),
        env={"SWITCHBOARD_SECRETS_KEY": ours},
    )
    assert done.returncode == 0, done.stderr
    stored = await pool.fetchval(
        f'SELECT api_key FROM "{tenant.schema}".integrations WHERE provider = $1', "openai"
    )
    assert Fernet(ours).decrypt(stored.encode()).decode() == found["llm_key"]
    secret = await pool.fetchval(
        f'SELECT secret FROM "{tenant.schema}".webhook_subscriptions WHERE url = $1',
        "https://hooks.example.com/two",
    )
    assert Fernet(ours).decrypt(secret.encode()).decode() == found["secret"]
    tool = await pool.fetchrow(f'SELECT secret, header_values FROM "{tenant.schema}".tools')
    assert Fernet(ours).decrypt(tool["secret"].encode()).decode() == found["tool_secret"]
    assert found["tool_header"] in Fernet(ours).decrypt(tool["header_values"].encode()).decode()
    # (This session's key cannot read them: the sub-account goes again.)
    await _purge(pool, tenant.id)


async def test_import_with_the_same_key_needs_no_flag(client, pool, servers, tmp_path) -> None:
    tenant, found = await _with_secrets(client, pool)
    export = _export(servers, tenant, tmp_path)
    await _purge(pool, tenant.id)
    done = switchboard(servers, "tenants", "import", str(export))
    assert done.returncode == 0, done.stderr
    # Then the API reads its secrets as before.
    shown = await client.get(f"{BASE}/agents/{found['agent_id']}", headers=tenant.headers)
    assert (await shown.get_json())["agent"]["webhook_secret"] == found["agent_secret"]
    tool = await client.get(f"{BASE}/tools/{found['tool_id']}", headers=tenant.headers)
    assert (await tool.get_json())["tool"]["secret"] == found["tool_secret"]


async def test_export_under_a_new_first_key_re_encrypts_older_values(
    client, pool, servers, tmp_path
) -> None:
    # Given secrets stored under the current key, and a new key put first (not yet rotated).
    tenant, found = await _with_secrets(client, pool)
    new = Fernet.generate_key().decode()
    out = tmp_path / "under-new.jsonl"
    done = switchboard(
        servers,
        "tenants",
        "export",
        str(tenant.id),
        "--out",
        str(out),
        env={"SWITCHBOARD_SECRETS_KEY": f"{new},{get_settings().secrets_key}"},
    )
    assert done.returncode == 0, done.stderr
    # Then the file is readable with the new key alone.
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    Fernet(new).decrypt(lines[0]["secrets_key_check"].encode())
    rows = {line["table"]: line["row"] for line in lines[1:-1]}
    assert (
        Fernet(new).decrypt(rows["integrations"]["api_key"].encode()).decode() == found["llm_key"]
    )
    assert (
        Fernet(new).decrypt(rows["agents"]["webhook_secret"].encode()).decode()
        == found["agent_secret"]
    )
    # Both secret columns of a tool.
    assert Fernet(new).decrypt(rows["tools"]["secret"].encode()).decode() == found["tool_secret"]
    assert (
        found["tool_header"]
        in Fernet(new).decrypt(rows["tools"]["header_values"].encode()).decode()
    )
