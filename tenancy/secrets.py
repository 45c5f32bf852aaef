"""Stored third-party secrets, encrypted under SWITCHBOARD_SECRETS_KEY (CONTRACT 8).

The setting holds one or more Fernet keys (32 random bytes, URL-safe base64), comma-separated:
the first encrypts, every one decrypts (`cryptography`'s MultiFernet), so a new key is put first,
`switchboard secrets rotate` re-encrypts every stored value under it, and the old one can then
go. Every reader and writer of a column listed in CONTROL_SECRETS or TENANT_SECRETS goes through
`encrypt` / `decrypt` here; a dump of the database alone reveals none of them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import asyncpg
from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from tenancy.settings import get_settings

SETTING = "SWITCHBOARD_SECRETS_KEY"


class SecretsKeyError(Exception):
    """The setting is missing or malformed, or a stored value is not readable under it."""


@dataclass(frozen=True)
class SecretColumn:
    """A column that holds ciphertext: text (Fernet token) or bytea (its bytes)."""

    table: str
    key: tuple[str, ...]
    column: str
    binary: bool = False


CONTROL_SECRETS = (
    SecretColumn("email_configs", ("organisation_id",), "password"),
    # Every stored idempotent answer: some carry an API key, an invitation token, a secret.
    SecretColumn("idempotency_keys", ("api_key_id", "key"), "response_body", binary=True),
)
TENANT_SECRETS = (
    SecretColumn("integrations", ("provider",), "api_key"),
    SecretColumn("agents", ("id",), "webhook_secret"),
    SecretColumn("webhook_subscriptions", ("id",), "secret"),
    SecretColumn("webhook_deliveries", ("id",), "target_secret"),
    # A tool's signing secret and an http tool's header values (CONTRACT 10).
    SecretColumn("tools", ("id",), "secret"),
    SecretColumn("tools", ("id",), "header_values"),
)


def new_key() -> str:
    return Fernet.generate_key().decode()


def parse_keys(value: str | None, setting: str = SETTING) -> list[Fernet]:
    """The keys of a setting's value, first one first; a SecretsKeyError naming the setting
    otherwise."""
    if not value or not value.strip():
        raise SecretsKeyError(
            f"{setting} is not set: give it a Fernet key (32 random bytes, "
            "URL-safe base64), e.g. from `switchboard secrets new-key`"
        )
    try:
        return [Fernet(part.strip()) for part in value.split(",") if part.strip()]
    except ValueError:
        raise SecretsKeyError(
            f"{setting} must be Fernet keys (32 random bytes in URL-safe "
            "base64 each), comma-separated"
        ) from None


@lru_cache(maxsize=8)
def _keys(value: str | None) -> MultiFernet:
    return MultiFernet(parse_keys(value))


def keys() -> MultiFernet:
    return _keys(get_settings().secrets_key)


@lru_cache(maxsize=8)
def _first(value: str | None) -> Fernet:
    return parse_keys(value)[0]


def under_first_key(token: bytes) -> bytes:
    """`token` itself when the first key reads it, else re-encrypted under the first key."""
    try:
        _first(get_settings().secrets_key).decrypt(token)
        return token
    except InvalidToken:
        return rotation()(token)


def check_configured() -> None:
    """Raise SecretsKeyError unless SWITCHBOARD_SECRETS_KEY is usable."""
    keys()


def encrypt(plain: str) -> str:
    return keys().encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    return decrypt_bytes(token.encode()).decode()


def encrypt_bytes(plain: bytes) -> bytes:
    return keys().encrypt(plain)


def decrypt_bytes(token: bytes) -> bytes:
    try:
        return keys().decrypt(token)
    except InvalidToken:
        raise SecretsKeyError(
            f"a stored secret cannot be decrypted with {SETTING}: is the key "
            "that encrypted it missing from the setting?"
        ) from None


def decrypt_optional(token: str | None) -> str | None:
    return None if token is None else decrypt(token)


# --- re-encryption: rotation, import under another key, the migration ---------------------------


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


async def transform_column(
    conn: asyncpg.Connection,
    qualified_table: str,
    spec: SecretColumn,
    change: Callable[[bytes], bytes],
) -> int:
    """Rewrite every non-null value of `spec.column` with `change` (on the token's bytes), in
    the caller's transaction; returns the number of rows rewritten."""
    column = _quote(spec.column)
    key_columns = ", ".join(_quote(name) for name in spec.key)
    # NO KEY UPDATE: only a non-key column changes, so a transaction that holds a row for a
    # foreign key (a call being placed holds its agent FOR KEY SHARE) does not block rotation.
    rows = await conn.fetch(
        f"SELECT {key_columns}, {column} AS value FROM {qualified_table} "
        f"WHERE {column} IS NOT NULL FOR NO KEY UPDATE"
    )
    where = " AND ".join(f"{_quote(name)} = ${index + 2}" for index, name in enumerate(spec.key))
    update = f"UPDATE {qualified_table} SET {column} = $1 WHERE {where}"
    for row in rows:
        value = row["value"]
        raw = bytes(value) if spec.binary else value.encode()
        new = change(raw)
        await conn.execute(
            update, new if spec.binary else new.decode(), *(row[name] for name in spec.key)
        )
    return len(rows)


def looks_like_token(value: bytes) -> bool:
    """A Fernet token's shape: URL-safe base64 of version 0x80, timestamp, IV, at least one
    block and the HMAC. Plain text (a `whsec_` secret, an answer's JSON) never has it."""
    try:
        raw = base64.urlsafe_b64decode(value)
    except (ValueError, TypeError):
        return False
    return len(raw) >= 73 and raw[0] == 0x80 and (len(raw) - 57) % 16 == 0


def rotation(old: list[Fernet] | None = None) -> Callable[[bytes], bytes]:
    """Re-encrypt a token under the first key of the setting; it may be under any key of the
    setting, or of `old` (an export's keys). A value that is not a token at all is plain text
    that a release before encryption wrote (during a rolling upgrade): it is encrypted."""
    current = keys()
    reader = current if not old else MultiFernet([*parse_keys(get_settings().secrets_key), *old])

    def change(token: bytes) -> bytes:
        try:
            return current.encrypt(reader.decrypt(token))
        except InvalidToken:
            if not looks_like_token(token):
                return current.encrypt(token)
            raise SecretsKeyError(
                f"a stored secret cannot be decrypted with {SETTING}"
                + (" or the export's key" if old is not None else "")
            ) from None

    return change


async def rotate_control(conn: asyncpg.Connection) -> int:
    change = rotation()
    return sum(
        [
            await transform_column(conn, f"control.{_quote(spec.table)}", spec, change)
            for spec in CONTROL_SECRETS
        ]
    )


async def rotate_tenant(
    conn: asyncpg.Connection, schema: str, old: list[Fernet] | None = None
) -> int:
    change = rotation(old)
    return sum(
        [
            await transform_column(conn, f"{_quote(schema)}.{_quote(spec.table)}", spec, change)
            for spec in TENANT_SECRETS
        ]
    )
