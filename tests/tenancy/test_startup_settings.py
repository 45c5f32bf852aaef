"""The settings a deployment must choose (CONTRACT 8, 9 "Secrets"): `serve` and `worker` refuse
the default pepper or a missing secrets key with one line; `dev` makes random ones and keeps
them; SWITCHBOARD_KEY_PEPPER_PREVIOUS keeps what was signed under the old pepper working."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from tenancy.settings import DEFAULT_KEY_PEPPER, get_settings


def _run(servers: Any, *args: str, **env: str | None) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
    }
    for name, value in env.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    try:
        return subprocess.run(
            [sys.executable, "-m", "cli", *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"`switchboard {' '.join(args)}` started instead of refusing"
        ) from None


def _refused_naming(done: subprocess.CompletedProcess[str], setting: str) -> None:
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert setting in lines[0] and "Traceback" not in done.stderr


COMMANDS = [("serve", "--port", "0"), ("worker",)]


@pytest.mark.parametrize("command", COMMANDS, ids=["serve", "worker"])
def test_start_with_the_default_pepper_is_refused_with_one_line(servers, migrated, command) -> None:
    for pepper in (None, DEFAULT_KEY_PEPPER):
        done = _run(servers, *command, SWITCHBOARD_KEY_PEPPER=pepper)
        _refused_naming(done, "SWITCHBOARD_KEY_PEPPER")


@pytest.mark.parametrize("command", COMMANDS, ids=["serve", "worker"])
def test_start_without_a_secrets_key_is_refused_with_one_line(servers, migrated, command) -> None:
    for value in (None, "", "not-a-fernet-key", f"{Fernet.generate_key().decode()},short"):
        done = _run(servers, *command, SWITCHBOARD_SECRETS_KEY=value)
        _refused_naming(done, "SWITCHBOARD_SECRETS_KEY")


def test_dev_makes_random_settings_once_and_keeps_them_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenancy.secrets_ops import DEV_SECRETS_FILE, ensure_dev_secrets

    monkeypatch.delenv("SWITCHBOARD_KEY_PEPPER", raising=False)
    monkeypatch.delenv("SWITCHBOARD_SECRETS_KEY", raising=False)
    ensure_dev_secrets(tmp_path)
    first = (os.environ["SWITCHBOARD_KEY_PEPPER"], os.environ["SWITCHBOARD_SECRETS_KEY"])
    kept = tmp_path / DEV_SECRETS_FILE
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert first[0] != DEFAULT_KEY_PEPPER and len(first[0]) >= 32
    Fernet(first[1])
    # A restart (fresh environment) reuses them, so keys and stored secrets keep working.
    monkeypatch.delenv("SWITCHBOARD_KEY_PEPPER")
    monkeypatch.delenv("SWITCHBOARD_SECRETS_KEY")
    ensure_dev_secrets(tmp_path)
    assert (os.environ["SWITCHBOARD_KEY_PEPPER"], os.environ["SWITCHBOARD_SECRETS_KEY"]) == first
    assert get_settings().key_pepper == first[0]
    assert json.loads(kept.read_text()) == {
        "SWITCHBOARD_KEY_PEPPER": first[0],
        "SWITCHBOARD_SECRETS_KEY": first[1],
    }
    get_settings.cache_clear()


# --- moving off a pepper ------------------------------------------------------------------------


@pytest.fixture
def pepper(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Switch the pepper (and the previous one) of this process, restored after the test."""

    def switch(current: str, previous: str | None = None) -> None:
        monkeypatch.setenv("SWITCHBOARD_KEY_PEPPER", current)
        if previous is None:
            monkeypatch.delenv("SWITCHBOARD_KEY_PEPPER_PREVIOUS", raising=False)
        else:
            monkeypatch.setenv("SWITCHBOARD_KEY_PEPPER_PREVIOUS", previous)
        get_settings.cache_clear()

    yield switch
    monkeypatch.undo()
    get_settings.cache_clear()


CONTACTS = "/webhooks/inbound/contacts"


async def test_keys_made_under_the_previous_pepper_keep_working(
    client, pool, agency, pepper
) -> None:
    from tests.factories import make_tenant

    old = get_settings().key_pepper
    tenant = await make_tenant(client, agency)
    untouched = await make_tenant(client, agency)
    new = "new-pepper-" + uuid.uuid4().hex
    # Without the previous pepper, keys made under it are unknown.
    pepper(new)
    assert (await client.get(CONTACTS, headers=tenant.headers)).status_code == 401
    # With it, they work, and keys issued now use the new pepper.
    pepper(new, old)
    assert (await client.get(CONTACTS, headers=tenant.headers)).status_code == 200
    fresh = await make_tenant(client, agency)
    pepper(new)
    assert (await client.get(CONTACTS, headers=fresh.headers)).status_code == 200
    # A key used while both were set was moved to the new pepper; one never used was not.
    assert (await client.get(CONTACTS, headers=tenant.headers)).status_code == 200
    assert (await client.get(CONTACTS, headers=untouched.headers)).status_code == 401
    pepper(old)


async def test_links_and_sandbox_signatures_under_the_previous_pepper_keep_working(
    client, tenant, pepper
) -> None:
    from api.conversations import signing
    from api.tracking import tokens

    old = get_settings().key_pepper
    link = tokens.sign("click", tenant.id, uuid.uuid4(), "https://example.com/offer")
    body = json.dumps(
        {"from": "+14155552671", "body": "hello", "message_id": uuid.uuid4().hex}
    ).encode()
    signature = signing.sign(tenant.id, body)
    new = "new-pepper-" + uuid.uuid4().hex

    async def sms() -> int:
        response = await client.post(
            f"/webhooks/providers/sandbox/sms/{tenant.id}",
            data=body,
            headers={"Content-Type": "application/json", signing.HEADER: signature},
        )
        return response.status_code

    pepper(new)
    assert (await client.get(f"/track/click/{link}")).status_code == 404
    assert await sms() == 401
    pepper(new, old)
    assert (await client.get(f"/track/click/{link}")).status_code == 302
    assert await sms() in (200, 201, 202)
    # New ones are signed under the new pepper.
    fresh = tokens.sign("open", tenant.id, uuid.uuid4())
    pepper(new)
    assert tokens.verify("open", fresh) is not None
