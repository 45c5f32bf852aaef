"""Operator side of secrets: `switchboard secrets ...`, the settings every long-running process
must have, and the random ones `switchboard dev` keeps in its data folder."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from secrets import token_urlsafe
from typing import Any

import asyncpg
from cryptography.fernet import Fernet

from tenancy import secrets
from tenancy.settings import DEFAULT_KEY_PEPPER, Settings, get_settings

DEV_SECRETS_FILE = "dev-secrets.json"


# --- the settings serve, worker and voice refuse to start without -------------------------------


def production_problem(settings: Settings) -> str | None:
    """One line naming the setting that is missing or unsafe; None when all is well."""
    if not settings.key_pepper or settings.key_pepper == DEFAULT_KEY_PEPPER:
        return (
            "SWITCHBOARD_KEY_PEPPER is the development default: set a long random value "
            "(see docs/operations.md, moving off the default pepper)"
        )
    return secrets_problem(settings)


def secrets_problem(settings: Settings) -> str | None:
    try:
        secrets.parse_keys(settings.secrets_key)
    except secrets.SecretsKeyError as exc:
        return str(exc)
    return None


def refuse_unless(problem: str | None) -> None:
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(1)


def ensure_dev_secrets(data_dir: Path) -> None:
    """`switchboard dev`: a random pepper and secrets key, made once and kept in the data folder
    (so keys and stored secrets keep working across restarts), unless the environment has them."""
    path = data_dir / DEV_SECRETS_FILE
    kept: dict[str, str] = {}
    if path.exists():
        kept = json.loads(path.read_text())
    wanted = {
        "SWITCHBOARD_KEY_PEPPER": lambda: token_urlsafe(32),
        "SWITCHBOARD_SECRETS_KEY": secrets.new_key,
    }
    changed = False
    for name, make in wanted.items():
        if name not in kept:
            kept[name] = make()
            changed = True
        current = os.environ.get(name)
        if not current or current == DEFAULT_KEY_PEPPER:
            os.environ[name] = kept[name]
    if changed:
        data_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(kept, out)
    get_settings.cache_clear()


def reencrypt_keys(path: str) -> list[Fernet]:
    """The exporting installation's keys for `tenants import --reencrypt KEY_FILE`: a file (not
    an argument, which other users could read in the process list) holding its
    SWITCHBOARD_SECRETS_KEY value."""
    try:
        with open(path, encoding="utf-8") as source:
            value = source.read().strip()
    except OSError as exc:
        refuse_unless(f"cannot read {path}: {exc.strerror}")
        raise
    try:
        return secrets.parse_keys(value, setting=f"the key in {path}")
    except secrets.SecretsKeyError as exc:
        refuse_unless(str(exc))
        raise


def use_kept_dev_secrets(data_dir: Path) -> None:
    """Beside `switchboard dev` (create-organisation, migrate, tenants, secrets): the settings
    it keeps in the data folder, for those the environment leaves unset, so keys it accepts
    are made here. serve and worker never do this: they refuse instead."""
    if (data_dir / DEV_SECRETS_FILE).exists():
        ensure_dev_secrets(data_dir)


# --- rotation -----------------------------------------------------------------------------------

LOCK_TIMEOUT = "5s"
LOCK_ROUNDS = 6
LOCK_RETRY_SECONDS = 5

SELECT_SCHEMAS = """
SELECT id, schema_name FROM control.sub_accounts
WHERE to_regnamespace(schema_name) IS NOT NULL
ORDER BY created_at, id
"""


@dataclass
class RotationReport:
    control: int = 0
    tenant_values: int = 0
    tenants: int = 0
    failed: dict[uuid.UUID, str] = field(default_factory=dict)


async def rotate_all(pool: asyncpg.Pool) -> RotationReport:
    """Re-encrypt every stored secret under the first key: the control tables in one
    transaction, then each tenant schema in its own (a failure is reported, never fatal to the
    others; running it again finishes the work, and values already under the first key are
    simply encrypted again)."""
    report = RotationReport()
    async with pool.acquire() as conn, conn.transaction():
        report.control = await secrets.rotate_control(conn)
    waiting = list(await pool.fetch(SELECT_SCHEMAS))
    # A tenant whose rows a long transaction holds is not waited for: it is tried again after
    # the others (LOCK_ROUNDS times in all), then reported; a later run finishes it.
    for round_number in range(1, LOCK_ROUNDS + 1):
        busy = []
        for row in waiting:
            try:
                async with pool.acquire() as conn, conn.transaction():
                    await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                    report.tenant_values += await secrets.rotate_tenant(conn, row["schema_name"])
                report.tenants += 1
                report.failed.pop(row["id"], None)
            except asyncpg.LockNotAvailableError as exc:
                busy.append(row)
                report.failed[row["id"]] = f"{type(exc).__name__}: {exc}"
            except (secrets.SecretsKeyError, asyncpg.PostgresError) as exc:
                report.failed[row["id"]] = f"{type(exc).__name__}: {exc}"
        waiting = busy
        if not waiting:
            break
        if round_number < LOCK_ROUNDS:
            await asyncio.sleep(LOCK_RETRY_SECONDS)
    return report


# --- `switchboard secrets ...` ------------------------------------------------------------------


def cmd_new_key(args: argparse.Namespace) -> int:
    print(secrets.new_key())
    return 0


def cmd_encrypt(args: argparse.Namespace) -> int:
    """A value from stdin as it is stored (for SQL an operator writes, e.g. an organisation's
    SMTP password in control.email_configs)."""
    refuse_unless(secrets_problem(get_settings()))
    value = sys.stdin.read().rstrip("\r\n")
    if not value:
        print("error: give the value to encrypt on stdin", file=sys.stderr)
        return 1
    print(secrets.encrypt(value))
    return 0


def cmd_rotate(args: argparse.Namespace) -> int:
    from tenancy.db import create_pool, session_url
    from tenancy.runtime import pin_urls

    refuse_unless(secrets_problem(get_settings()))
    database_url, _ = pin_urls()

    async def main() -> RotationReport:
        pool = await create_pool(session_url(database_url), min_size=1, max_size=2)
        try:
            return await rotate_all(pool)
        finally:
            await pool.close()

    try:
        report = asyncio.run(main())
    except (secrets.SecretsKeyError, asyncpg.PostgresError) as exc:
        print(f"error: control schema: {exc}", file=sys.stderr)
        return 1
    for sub_account_id, error in report.failed.items():
        print(f"FAILED {sub_account_id}: {error}", file=sys.stderr)
    print(
        f"re-encrypted {report.control + report.tenant_values} secrets under the first key "
        f"of SWITCHBOARD_SECRETS_KEY ({report.control} in control, {report.tenant_values} in "
        f"{report.tenants} tenant schemas); {len(report.failed)} failed",
        file=sys.stderr,
    )
    return 1 if report.failed else 0


def add_commands(sub: Any) -> None:
    group = sub.add_parser("secrets", help="keys for stored secrets: new key, rotate, encrypt")
    commands = group.add_subparsers(dest="secrets_command", required=True)
    commands.add_parser("new-key", help="print a new SWITCHBOARD_SECRETS_KEY key").set_defaults(
        func=cmd_new_key
    )
    commands.add_parser(
        "rotate", help="re-encrypt every stored secret under the first key"
    ).set_defaults(func=cmd_rotate)
    commands.add_parser(
        "encrypt", help="encrypt a value read from stdin, as it is stored"
    ).set_defaults(func=cmd_encrypt)
