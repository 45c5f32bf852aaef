"""Shared by the migrations that encrypt stored secrets (c0005, t0003): rewrite the columns
tenancy.secrets lists, row by row, in the migration's transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import Connection, text

from tenancy import secrets


def _rewrite(
    conn: Connection,
    schema: str | None,
    columns: Iterable[secrets.SecretColumn],
    change: Callable[[bytes], bytes],
) -> None:
    for spec in columns:
        table = f'"{spec.table}"' if schema is None else f'{schema}."{spec.table}"'
        keys = ", ".join(f'"{name}"' for name in spec.key)
        where = " AND ".join(f'"{name}" = :k{index}' for index, name in enumerate(spec.key))
        rows = conn.execute(
            text(f'SELECT {keys}, "{spec.column}" FROM {table} WHERE "{spec.column}" IS NOT NULL')
        ).all()
        update = text(f'UPDATE {table} SET "{spec.column}" = :value WHERE {where}')
        for row in rows:
            *key, value = row
            raw = bytes(value) if spec.binary else value.encode()
            new = change(raw)
            conn.execute(
                update,
                {
                    "value": new if spec.binary else new.decode(),
                    **{f"k{index}": part for index, part in enumerate(key)},
                },
            )


def encrypt_all(
    conn: Connection, schema: str | None, columns: Iterable[secrets.SecretColumn]
) -> None:
    secrets.check_configured()
    _rewrite(conn, schema, columns, secrets.encrypt_bytes)


def decrypt_all(
    conn: Connection, schema: str | None, columns: Iterable[secrets.SecretColumn]
) -> None:
    _rewrite(conn, schema, columns, secrets.decrypt_bytes)
