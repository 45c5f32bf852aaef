"""Operator work on whole tenants: list, suspend and resume, delete and purge, export and import.

Everything here takes an asyncpg pool and plain values; `switchboard tenants ...` (cli/main.py)
and the purge cron job (tenancy/maintenance.py) call it. A refusal is a `TenantOpError` whose
message is meant for the operator; nothing has been changed when one is raised.

Export file: UTF-8 JSON lines, one object per line, in this order:

1. header: ``{"format": "switchboard-tenant-export", "format_version": 2, "sub_account_id",
   "organisation_id", "schema_name", "schema_version", "exported_at", "secrets_key_check"}``;
   ``schema_version`` is the tenant schema's alembic revision, read from the schema itself;
   ``secrets_key_check`` is a Fernet token under the exporting installation's first
   SWITCHBOARD_SECRETS_KEY key, under which every stored secret in the file is encrypted (an
   import needs that key, or ``--reencrypt`` with it);
2. control rows, ``{"table": "control.<name>", "row": {...}}``: the users the sub-account's
   memberships and invitations refer to, the sub_accounts row, its api_keys (hashes only),
   memberships, invitations and due_work;
3. tenant rows, ``{"table": "<name>", "row": {...}}``, table by table in foreign-key order;
4. call recordings, ``{"recording": "<sub_account_id>/<call_id>.wav", "wav_base64": "..."}``,
   one line each (format version 2; version 1 files have none and are still read);
5. trailer: ``{"end": true, "rows": <number of row lines>, "recordings": <number of recording
   lines>}``, so a truncated file is refused.

A row is PostgreSQL's own ``row_to_json`` of the stored row and goes back in through
``json_populate_record``, so every column type round-trips exactly (numeric, timestamptz, bytea,
arrays, jsonb) and the file is read in one pass without holding it in memory.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

import asyncpg
from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from integrations.recordings import RecordingStore, RecordingStoreError, parse_key
from tenancy import secrets
from tenancy.clock import iso, utcnow
from tenancy.db import SCHEMA_NAME, schema_name_for, set_search_path
from tenancy.recordings import RecordingsMisconfigured, recording_store
from tenancy.schema import (
    advance_shared_sequences,
    create_tenant_schema,
    delete_shared_rows,
    tenant_head,
)
from tenancy.tables import shared_metadata, tenant_metadata
from tenancy.tables.shared import SHARED_SCHEMA

FORMAT = "switchboard-tenant-export"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
SECRETS_CHECK = b"switchboard-tenant-export-secrets"
# table -> its secret columns (a tool has two: its signing secret and its header values).
SECRET_COLUMNS = {
    table: tuple(spec.column for spec in secrets.TENANT_SECRETS if spec.table == table)
    for table in dict.fromkeys(spec.table for spec in secrets.TENANT_SECRETS)
}
BATCH_ROWS = 500
PURGE_LOCK_TIMEOUT = "10s"

log = logging.getLogger("switchboard.tenant_ops")


class TenantOpError(Exception):
    """A refusal for the operator to read; nothing was changed."""


# --- list -------------------------------------------------------------------------------------

# A sub-account's size: its rows in the shared tables (pg_column_size of each, TOAST included,
# compressed as stored; index entries not counted), None when its schema is missing.
ROW_BYTES = " + ".join(
    f"(SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM {SHARED_SCHEMA}.{_table.name} AS r "
    "WHERE r.sub_account_id = s.id)"
    for _table in shared_metadata.sorted_tables
)
LIST_TENANTS = f"""
SELECT s.id, s.organisation_id, s.name, s.slug, s.schema_name, s.schema_version, s.status,
       CASE WHEN to_regnamespace(s.schema_name) IS NOT NULL THEN ({ROW_BYTES})::bigint
       END AS size_bytes,
       s.deleted_at, s.purge_after, s.created_at
FROM control.sub_accounts AS s
WHERE ($1::uuid IS NULL OR s.organisation_id = $1) AND ($2::text IS NULL OR s.status = $2)
ORDER BY s.created_at, s.id
"""


async def list_tenants(
    pool: asyncpg.Pool, organisation_id: uuid.UUID | None = None, status: str | None = None
) -> list[dict[str, Any]]:
    """Every sub-account with its schema, schema version, status and size (its rows' bytes;
    None when the schema is missing)."""
    rows = await pool.fetch(LIST_TENANTS, organisation_id, status)
    return [dict(row) for row in rows]


# --- suspend, resume, delete ------------------------------------------------------------------

SELECT_STATUS = "SELECT status, purge_after FROM control.sub_accounts WHERE id = $1"

# Suspend and delete notify tenancy.principals.CHANNEL in the same statement, so every API
# process drops its cached keys when the change commits.
SUSPEND = """
WITH changed AS (
    UPDATE control.sub_accounts SET status = 'suspended', updated_at = now()
    WHERE id = $1 AND status = 'active'
    RETURNING status
)
SELECT status, pg_notify('switchboard_principals', '') FROM changed
"""

RESUME = """
UPDATE control.sub_accounts
SET status = 'active', deleted_at = NULL, purge_after = NULL, updated_at = now()
WHERE id = $1 AND status IN ('suspended', 'deleted')
RETURNING status
"""

MARK_DELETED = """
WITH changed AS (
    UPDATE control.sub_accounts
    SET status = 'deleted', deleted_at = now(), purge_after = now() + make_interval(days => $2),
        updated_at = now()
    WHERE id = $1 AND status <> 'deleted'
    RETURNING purge_after
)
SELECT purge_after, pg_notify('switchboard_principals', '') FROM changed
"""


@dataclass(frozen=True)
class StatusChange:
    sub_account_id: uuid.UUID
    status: str
    changed: bool
    purge_after: datetime | None = None


async def _current(pool: asyncpg.Pool, sub_account_id: uuid.UUID) -> asyncpg.Record:
    row = await pool.fetchrow(SELECT_STATUS, sub_account_id)
    if row is None:
        raise TenantOpError(f"no sub-account {sub_account_id}")
    return row


async def suspend(pool: asyncpg.Pool, sub_account_id: uuid.UUID) -> StatusChange:
    """active -> suspended: its keys answer 401 from the next request on."""
    if await pool.fetchval(SUSPEND, sub_account_id) is not None:
        return StatusChange(sub_account_id, "suspended", True)
    current = await _current(pool, sub_account_id)
    if current["status"] == "deleted":
        raise TenantOpError(
            f"sub-account {sub_account_id} is deleted (purged after "
            f"{iso(current['purge_after'])}); resume it to undo the delete"
        )
    return StatusChange(sub_account_id, current["status"], False)


async def resume(pool: asyncpg.Pool, sub_account_id: uuid.UUID) -> StatusChange:
    """suspended, or deleted and not yet purged -> active: its keys work again."""
    if await pool.fetchval(RESUME, sub_account_id) is not None:
        return StatusChange(sub_account_id, "active", True)
    current = await _current(pool, sub_account_id)
    return StatusChange(sub_account_id, current["status"], False)


async def delete(
    pool: asyncpg.Pool, sub_account_id: uuid.UUID, grace_days: int = 7
) -> StatusChange:
    """Mark deleted: keys stop at once; the schema is dropped by the first purge after the
    grace period. Deleting again keeps the first purge time."""
    if grace_days < 0:
        raise TenantOpError("the grace period cannot be negative")
    purge_after = await pool.fetchval(MARK_DELETED, sub_account_id, grace_days)
    if purge_after is not None:
        return StatusChange(sub_account_id, "deleted", True, purge_after)
    current = await _current(pool, sub_account_id)
    return StatusChange(sub_account_id, "deleted", False, current["purge_after"])


# --- purge ------------------------------------------------------------------------------------

SELECT_PURGEABLE = """
SELECT id FROM control.sub_accounts
WHERE status = 'deleted' AND purge_after <= now()
ORDER BY purge_after, id
LIMIT $1
"""

LOCK_PURGEABLE = """
SELECT schema_name FROM control.sub_accounts
WHERE id = $1 AND status = 'deleted' AND purge_after <= now()
FOR UPDATE SKIP LOCKED
"""

DELETE_SUB_ACCOUNT = "DELETE FROM control.sub_accounts WHERE id = $1"


@dataclass
class PurgeReport:
    purged: list[uuid.UUID] = field(default_factory=list)
    failed: dict[uuid.UUID, str] = field(default_factory=dict)


async def purge_due(
    pool: asyncpg.Pool, limit: int | None = None, store: RecordingStore | None = None
) -> PurgeReport:
    """Drop the schema, the control rows and the call recordings of every deleted sub-account
    past its grace period.

    One transaction per sub-account (a failure is reported and retried by the next run); a row
    another purger holds is skipped. The control rows go by ON DELETE CASCADE (keys, members,
    invitations, due work); users stay, as they may belong to other sub-accounts.
    """
    report = PurgeReport()
    for row in await pool.fetch(SELECT_PURGEABLE, limit):
        sub_account_id = row["id"]
        try:
            if await _purge_one(pool, sub_account_id, store):
                report.purged.append(sub_account_id)
        except (asyncpg.PostgresError, TenantOpError) as exc:
            report.failed[sub_account_id] = f"{type(exc).__name__}: {exc}"
    return report


async def _purge_one(
    pool: asyncpg.Pool, sub_account_id: uuid.UUID, store: RecordingStore | None
) -> bool:
    async with pool.acquire() as conn, conn.transaction():
        schema = await conn.fetchval(LOCK_PURGEABLE, sub_account_id)
        if schema is None:
            return False
        if not SCHEMA_NAME.fullmatch(schema):
            raise TenantOpError(f"sub-account {sub_account_id} has an unexpected schema name")
        # Recordings first, while the row is held: should they fail, the schema stays and the
        # next run tries again; should the drop fail after them, the tenant was going anyway.
        try:
            await (store or recording_store()).delete_tenant(sub_account_id)
        except (RecordingStoreError, RecordingsMisconfigured) as exc:
            raise TenantOpError(str(exc)) from None
        await conn.execute("SELECT set_config('lock_timeout', $1, true)", PURGE_LOCK_TIMEOUT)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await delete_shared_rows(conn, sub_account_id)
        await conn.execute(DELETE_SUB_ACCOUNT, sub_account_id)
    return True


# --- export -----------------------------------------------------------------------------------

# (table, query) in the order an import inserts them; $1 is the sub-account id.
CONTROL_EXPORTS: list[tuple[str, str]] = [
    (
        "control.users",
        """
        SELECT row_to_json(u)::text FROM control.users AS u
        WHERE u.id IN (SELECT user_id FROM control.memberships WHERE sub_account_id = $1
                       UNION
                       SELECT accepted_user_id FROM control.invitations WHERE sub_account_id = $1)
        ORDER BY u.id""",
    ),
    (
        "control.sub_accounts",
        "SELECT row_to_json(s)::text FROM control.sub_accounts AS s WHERE s.id = $1",
    ),
    (
        "control.api_keys",
        """
        SELECT row_to_json(k)::text FROM control.api_keys AS k WHERE k.sub_account_id = $1
        ORDER BY k.created_at, k.id""",
    ),
    (
        "control.memberships",
        """
        SELECT row_to_json(m)::text FROM control.memberships AS m WHERE m.sub_account_id = $1
        ORDER BY m.created_at, m.id""",
    ),
    (
        "control.invitations",
        """
        SELECT row_to_json(i)::text FROM control.invitations AS i WHERE i.sub_account_id = $1
        ORDER BY i.created_at, i.id""",
    ),
    (
        "control.due_work",
        """
        SELECT row_to_json(w)::text FROM control.due_work AS w WHERE w.sub_account_id = $1
        ORDER BY w.due_at, w.id""",
    ),
]

SELECT_SUB_ACCOUNT = """
SELECT id, organisation_id, schema_name FROM control.sub_accounts WHERE id = $1
"""

TENANT_TABLES = """
SELECT c.relname FROM pg_catalog.pg_class AS c
WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p', 'v')
  AND c.relname <> 'alembic_version'
"""


@dataclass(frozen=True)
class ExportReport:
    sub_account_id: uuid.UUID
    schema_version: str
    rows: int
    tables: dict[str, int]
    recordings: int = 0


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _ordered_tables(names: Iterable[str]) -> list[str]:
    """Foreign-key order of the tenant metadata; tables it does not know go last, by name."""
    rank = {table.name: index for index, table in enumerate(tenant_metadata.sorted_tables)}
    return sorted(names, key=lambda name: (rank.get(name, len(rank)), name))


@asynccontextmanager
async def _snapshot(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    # One REPEATABLE READ transaction, so the control rows and every tenant table come from the
    # same snapshot (tenant_transaction runs at READ COMMITTED, one statement's view at a time).
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        yield conn


async def export_tenant(
    pool: asyncpg.Pool, sub_account_id: uuid.UUID, out: TextIO, store: RecordingStore | None = None
) -> ExportReport:
    """Write one sub-account's control rows, tenant rows and call recordings to `out`
    (format: module doc)."""
    async with _snapshot(pool) as conn:
        sub = await conn.fetchrow(SELECT_SUB_ACCOUNT, sub_account_id)
        if sub is None:
            raise TenantOpError(f"no sub-account {sub_account_id}")
        schema = sub["schema_name"]
        tables = [row["relname"] for row in await conn.fetch(TENANT_TABLES, schema)]
        if not SCHEMA_NAME.fullmatch(schema) or not tables:
            raise TenantOpError(f"sub-account {sub_account_id} has no tenant schema to export")
        await set_search_path(conn, schema)
        version = await conn.fetchval("SELECT version_num FROM alembic_version")
        out.write(
            json.dumps(
                {
                    "format": FORMAT,
                    "format_version": FORMAT_VERSION,
                    "sub_account_id": str(sub_account_id),
                    "organisation_id": str(sub["organisation_id"]),
                    "schema_name": schema,
                    "schema_version": version,
                    "exported_at": iso(utcnow()),
                    "secrets_key_check": secrets.encrypt_bytes(SECRETS_CHECK).decode(),
                }
            )
            + "\n"
        )
        counts: dict[str, int] = {}
        for table, query in CONTROL_EXPORTS:
            counts[table] = await _write_rows(conn, out, table, query, sub_account_id)
        for table in _ordered_tables(tables):
            columns = SECRET_COLUMNS.get(table)
            if columns is None:
                query = f"SELECT row_to_json(t)::text FROM {_quote(table)} AS t"
                counts[table] = await _write_rows(conn, out, table, query)
            else:
                selected = ", ".join(f"t.{_quote(column)}" for column in columns)
                query = f"SELECT row_to_json(t)::text, {selected} FROM {_quote(table)} AS t"
                # A cursor name per row shape: asyncpg keeps the FETCH's row shape per
                # statement text.
                counts[table] = await _write_rows(
                    conn, out, table, query, cursor=f"export_secret_rows_{len(columns)}"
                )
    recordings = await _write_recordings(store or recording_store(), sub_account_id, out)
    total = sum(counts.values())
    out.write(json.dumps({"end": True, "rows": total, "recordings": recordings}) + "\n")
    return ExportReport(sub_account_id, version, total, counts, recordings)


async def _write_recordings(store: RecordingStore, sub_account_id: uuid.UUID, out: TextIO) -> int:
    """One line per recording, read one at a time (a recording is a few megabytes)."""
    count = 0
    try:
        for key in await store.keys(sub_account_id):
            wav = await store.get(key)
            if wav is None:
                continue
            out.write(
                json.dumps({"recording": key, "wav_base64": base64.b64encode(wav).decode()}) + "\n"
            )
            count += 1
    except (RecordingStoreError, RecordingsMisconfigured) as exc:
        raise TenantOpError(f"the call recordings cannot be read: {exc}") from None
    return count


async def _write_rows(
    conn: asyncpg.Connection,
    out: TextIO,
    table: str,
    query: str,
    *args: Any,
    cursor: str = "export_rows",
) -> int:
    prefix = '{"table": ' + json.dumps(table) + ', "row": '
    count = 0
    # A cursor declared in SQL rather than asyncpg's `conn.cursor()`, which always uses a named
    # prepared statement: PgBouncer before 1.21 cannot follow those in transaction mode.
    await conn.execute(f"DECLARE {cursor} NO SCROLL CURSOR FOR {query}", *args)
    while rows := await conn.fetch(f"FETCH FORWARD {BATCH_ROWS} FROM {cursor}"):
        for record in rows:
            out.write(prefix + _under_first_key(record) + "}\n")
        count += len(rows)
    await conn.execute(f"CLOSE {cursor}")
    return count


def _under_first_key(record: asyncpg.Record) -> str:
    """The row's JSON with its secrets (the columns after it, if any) under the first key: the
    file is readable with the key its header names, whichever key each value was stored
    under."""
    line: str = record[0]
    for token in list(record)[1:]:
        if token is None:
            continue
        fresh = secrets.under_first_key(token.encode()).decode()
        if fresh != token:
            # Fernet tokens are URL-safe base64: JSON writes them verbatim, once in the row.
            line = line.replace(json.dumps(token), json.dumps(fresh), 1)
    return line


# --- import -----------------------------------------------------------------------------------

# Parameters every insert may use: $1 the batch of lines, then these, typed once.
_PARAMS = """
WITH p AS (SELECT $2::uuid AS sub_account_id, $3::uuid AS organisation_id,
                  $4::uuid[] AS user_from, $5::uuid[] AS user_to, $6::text AS head)
"""


@dataclass(frozen=True)
class ControlTable:
    """How rows of one control table come in: which rows are this tenant's, what is rewritten."""

    scope: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    user_column: str | None = None
    conflict: str = ""


_REVIVE = "CASE WHEN r.status = 'deleted' THEN NULL ELSE r.{} END"

CONTROL_IMPORTS: dict[str, ControlTable] = {
    # Users are shared across sub-accounts: one that exists (same id or email) is kept as is.
    "control.users": ControlTable(conflict=" ON CONFLICT DO NOTHING"),
    "control.sub_accounts": ControlTable(
        scope="r.id = p.sub_account_id AND r.organisation_id = p.organisation_id",
        overrides={
            # A plan of the organisation that is not here is dropped (the sub-account keeps
            # its own copies of max_users, features and rebilling).
            "plan_id": "CASE WHEN EXISTS (SELECT 1 FROM control.plans AS pl WHERE pl.id ="
            " r.plan_id AND pl.organisation_id = r.organisation_id) THEN r.plan_id END",
            # Importing a deleted sub-account brings it back; a suspended one stays suspended.
            "status": "CASE WHEN r.status = 'deleted' THEN 'active' ELSE r.status END",
            "deleted_at": _REVIVE.format("deleted_at"),
            "purge_after": _REVIVE.format("purge_after"),
            "schema_name": "'t_' || replace(p.sub_account_id::text, '-', '')",
            "schema_version": "p.head",
        },
    ),
    "control.api_keys": ControlTable(
        scope="r.sub_account_id = p.sub_account_id AND r.organisation_id = p.organisation_id"
        " AND r.kind = 'sub_account'"
    ),
    "control.memberships": ControlTable(
        scope="r.sub_account_id = p.sub_account_id", user_column="user_id"
    ),
    "control.invitations": ControlTable(
        scope="r.sub_account_id = p.sub_account_id", user_column="accepted_user_id"
    ),
    "control.due_work": ControlTable(scope="r.sub_account_id = p.sub_account_id"),
}

# Users already here under another id (matched by email) stand in for the exported ones.
MATCH_USERS = (
    _PARAMS
    + """
SELECT r.id AS exported, u.id AS existing
FROM p, unnest($1::text[]) AS l(line)
CROSS JOIN LATERAL json_populate_record(NULL::control.users, (l.line::json) -> 'row') AS r
JOIN control.users AS u ON u.email = r.email AND u.id <> r.id
"""
)

COLUMNS = """
SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum) AS columns
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
     AND a.attgenerated = ''
WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p', 'v')
GROUP BY c.relname
"""

ORGANISATION_EXISTS = "SELECT EXISTS (SELECT 1 FROM control.organisations WHERE id = $1)"
SUB_ACCOUNT_EXISTS = """
SELECT EXISTS (SELECT 1 FROM control.sub_accounts WHERE id = $1 OR schema_name = $2)
    OR to_regnamespace($2) IS NOT NULL
"""


@dataclass(frozen=True)
class ExportHeader:
    sub_account_id: uuid.UUID
    organisation_id: uuid.UUID
    schema_name: str
    schema_version: str
    secrets_key_check: str | None = None


@dataclass
class ImportReport:
    sub_account_id: uuid.UUID
    rows: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    users_matched: int = 0
    plan_dropped: bool = False
    recordings: int = 0


def read_header(line: str) -> ExportHeader:
    try:
        header = json.loads(line)
        if header.get("format") != FORMAT:
            raise ValueError
    except (ValueError, AttributeError):
        raise TenantOpError("not a Switchboard tenant export (no header line)") from None
    if header.get("format_version") not in READABLE_VERSIONS:
        raise TenantOpError(
            f"export format version {header.get('format_version')!r} is not "
            f"supported (this Switchboard reads versions 1 and 2)"
        )
    try:
        sub_account_id = uuid.UUID(str(header["sub_account_id"]))
        organisation_id = uuid.UUID(str(header["organisation_id"]))
        version = str(header["schema_version"])
    except (KeyError, ValueError):
        raise TenantOpError("the export header is incomplete") from None
    check = header.get("secrets_key_check")
    return ExportHeader(
        sub_account_id,
        organisation_id,
        schema_name_for(sub_account_id),
        version,
        check if isinstance(check, str) else None,
    )


def check_secrets_key(header: ExportHeader, reencrypt_from: list[Fernet] | None) -> None:
    """The export's secrets must be readable: under this installation's key, or (to be
    re-encrypted under it) under the key given with --reencrypt."""
    if header.secrets_key_check is None:
        raise TenantOpError("the export header names no secrets key (secrets_key_check)")
    reader = secrets.keys() if reencrypt_from is None else MultiFernet(reencrypt_from)
    try:
        reader.decrypt(header.secrets_key_check.encode())
    except InvalidToken:
        if reencrypt_from is None:
            raise TenantOpError(
                "the export's secrets are encrypted under another SWITCHBOARD_SECRETS_KEY: "
                "import it with that key, or with --reencrypt KEY_FILE (a file holding the "
                "exporting installation's key) to encrypt them under this one"
            ) from None
        raise TenantOpError(
            "the key given to --reencrypt is not the key this export's secrets are encrypted under"
        ) from None


async def import_tenant(
    pool: asyncpg.Pool,
    lines: Iterable[str],
    reencrypt_from: list[Fernet] | None = None,
    store: RecordingStore | None = None,
) -> ImportReport:
    """Recreate an exported sub-account under its own id, in one transaction.

    Refused unless the export's tenant schema version is this installation's head, the
    organisation exists here, neither the sub-account nor its schema does, and its secrets are
    under this installation's SWITCHBOARD_SECRETS_KEY, or under `reencrypt_from` (the exporting
    installation's keys), in which case they are re-encrypted under this one's first key.
    Its call recordings go to the recordings store as they are read; should the import fail,
    they are deleted again.
    """
    try:
        return await _import(pool, iter(lines), reencrypt_from, store or recording_store())
    except UnicodeDecodeError:
        raise TenantOpError("the file is not UTF-8 text: not a Switchboard tenant export") from None
    except secrets.SecretsKeyError as exc:
        raise TenantOpError(f"import failed and nothing was written: {exc}") from None


async def _import(
    pool: asyncpg.Pool,
    stream: Iterator[str],
    reencrypt_from: list[Fernet] | None,
    store: RecordingStore,
) -> ImportReport:
    header = read_header(next(stream, ""))
    head = tenant_head()
    if header.schema_version != head:
        raise TenantOpError(
            f"the export's tenant schema is at revision {header.schema_version} but this "
            f"installation's tenant head is {head}; import it into an installation at "
            f"{header.schema_version}, run `switchboard migrate` there and export again"
        )
    check_secrets_key(header, reencrypt_from)
    try:
        async with pool.acquire() as conn:
            importer = _Importer(conn, header, head, reencrypt_from, store)
            try:
                async with conn.transaction():
                    await _check_target(conn, header)
                    await importer.run(stream)
            except BaseException:
                await importer.forget_recordings()
                raise
            return importer.report
    except asyncpg.PostgresError as exc:
        raise TenantOpError(
            f"import failed and nothing was written: {type(exc).__name__}: {exc}"
        ) from None


async def _check_target(conn: asyncpg.Connection, header: ExportHeader) -> None:
    if not await conn.fetchval(ORGANISATION_EXISTS, header.organisation_id):
        raise TenantOpError(
            f"organisation {header.organisation_id} does not exist here; "
            "create it (or restore it) before importing its sub-account"
        )
    if await conn.fetchval(SUB_ACCOUNT_EXISTS, header.sub_account_id, header.schema_name):
        raise TenantOpError(
            f"sub-account {header.sub_account_id} (or its schema) already "
            "exists here; delete and purge it first to replace it"
        )


# The imported numbers another sub-account holds (none claimed is the one refusal).
CLAIM_NUMBERS = """
WITH active AS (SELECT id, phone_number FROM {schema}.phone_numbers WHERE is_active),
claimed AS (
    INSERT INTO control.phone_number_directory (phone_number, sub_account_id, phone_number_id)
    SELECT phone_number, $1, id FROM active
    ON CONFLICT (phone_number) DO NOTHING
    RETURNING phone_number
)
SELECT phone_number FROM active WHERE phone_number NOT IN (SELECT phone_number FROM claimed)
ORDER BY phone_number
"""


class _Importer:
    """Inserts the file's rows in file order, in batches of consecutive rows of one table."""

    def __init__(
        self,
        conn: asyncpg.Connection,
        header: ExportHeader,
        head: str,
        reencrypt_from: list[Fernet] | None,
        store: RecordingStore,
    ) -> None:
        self.conn = conn
        self.store = store
        self.reencrypt_from = reencrypt_from
        self.header = header
        self.head = head
        self.report = ImportReport(header.sub_account_id)
        self.control_columns: dict[str, list[str]] = {}
        self.tenant_columns: dict[str, list[str]] | None = None
        self.user_from: list[uuid.UUID] = []
        self.user_to: list[uuid.UUID] = []
        self.batch: list[str] = []
        self.batch_key: tuple[str, tuple[str, ...]] | None = None
        self.exported_plan: str | None = None

    async def run(self, stream: Iterator[str]) -> None:
        self.control_columns = {
            f"control.{name}": columns
            for name, columns in await self.conn.fetch(COLUMNS, "control")
        }
        for number, line in enumerate(stream, start=2):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                if not isinstance(item, dict):
                    raise ValueError
            except ValueError:
                raise TenantOpError(f"line {number} is not a JSON object") from None
            if item.get("end") is True:
                await self._finish(item.get("rows"), item.get("recordings", 0))
                return
            if "recording" in item:
                await self._add_recording(number, item)
                continue
            await self._add(number, item, line)
        raise TenantOpError("the file ends without its trailer line: the export is truncated")

    async def _add(self, number: int, item: dict[str, Any], line: str) -> None:
        table, row = item.get("table"), item.get("row")
        if not isinstance(table, str) or not isinstance(row, dict):
            raise TenantOpError(f"line {number} has no table and row")
        known = await self._columns(number, table)
        unknown = sorted(set(row) - set(known))
        if unknown:
            raise TenantOpError(
                f"line {number}: table {table} has no column "
                f"{', '.join(unknown)} in this installation"
            )
        if table == "control.sub_accounts":
            self.exported_plan = row.get("plan_id")
        key = (table, tuple(column for column in known if column in row))
        if key != self.batch_key or len(self.batch) >= BATCH_ROWS:
            await self._flush()
            self.batch_key = key
        self.batch.append(line)

    async def _add_recording(self, number: int, item: dict[str, Any]) -> None:
        key, data = item.get("recording"), item.get("wav_base64")
        try:
            if not isinstance(key, str) or not isinstance(data, str):
                raise ValueError
            owner, _ = parse_key(key)
            wav = base64.b64decode(data, validate=True)
        except (ValueError, binascii.Error):
            raise TenantOpError(f"line {number} is not a recording line") from None
        if owner != self.header.sub_account_id:
            raise TenantOpError(f"line {number}: the recording belongs to another sub-account")
        try:
            await self.store.put(key, wav)
        except (RecordingStoreError, RecordingsMisconfigured) as exc:
            raise TenantOpError(f"line {number}: {exc}") from None
        self.report.recordings += 1

    async def forget_recordings(self) -> None:
        """Delete the recordings this import wrote (it failed; the sub-account is not here)."""
        if not self.report.recordings:
            return
        try:
            await self.store.delete_tenant(self.header.sub_account_id)
        except RecordingStoreError as exc:
            log.warning(
                "import of %s failed and its recordings could not be removed: %s",
                self.header.sub_account_id,
                exc,
            )

    async def _columns(self, number: int, table: str) -> list[str]:
        if table.startswith("control."):
            if self.tenant_columns is not None:
                raise TenantOpError(f"line {number}: control rows must come before tenant rows")
            if table not in CONTROL_IMPORTS:
                raise TenantOpError(f"line {number}: {table} is not part of a tenant export")
            return self.control_columns[table]
        if self.tenant_columns is None:
            await self._flush()
            self.tenant_columns = await self._create_schema()
        if table not in self.tenant_columns:
            raise TenantOpError(f"line {number}: the tenant schema has no table {table}")
        return self.tenant_columns[table]

    async def _create_schema(self) -> dict[str, list[str]]:
        if self.report.tables.get("control.sub_accounts") != 1:
            raise TenantOpError("the export has no sub_accounts row for its sub-account")
        await create_tenant_schema(self.conn, self.header.schema_name)
        return dict(await self.conn.fetch(COLUMNS, self.header.schema_name))

    async def _flush(self) -> None:
        if not self.batch or self.batch_key is None:
            return
        table, columns = self.batch_key
        lines, self.batch = self.batch, []
        params = (
            lines,
            self.header.sub_account_id,
            self.header.organisation_id,
            self.user_from,
            self.user_to,
            self.head,
        )
        if table == "control.users":
            for exported, existing in await self.conn.fetch(MATCH_USERS, *params):
                self.user_from.append(exported)
                self.user_to.append(existing)
            self.report.users_matched = len(self.user_from)
        status = await self.conn.execute(_insert_sql(table, list(columns)), *params)
        inserted = int(status.split()[-1])
        spec = CONTROL_IMPORTS.get(table)
        if spec is not None and spec.scope is not None and inserted != len(lines):
            raise TenantOpError(f"{table} rows in the file belong to another sub-account")
        self.report.tables[table] = self.report.tables.get(table, 0) + len(lines)
        self.report.rows += len(lines)

    async def _finish(self, rows: Any, recordings: Any) -> None:
        await self._flush()
        if self.tenant_columns is None:
            self.tenant_columns = await self._create_schema()
        if rows != self.report.rows:
            raise TenantOpError(
                f"the trailer counts {rows} rows but the file has "
                f"{self.report.rows}: the export is damaged"
            )
        if recordings != self.report.recordings:
            raise TenantOpError(
                f"the trailer counts {recordings} recordings but the file has "
                f"{self.report.recordings}: the export is damaged"
            )
        if self.reencrypt_from:
            await secrets.rotate_tenant(self.conn, self.header.schema_name, self.reencrypt_from)
        await advance_shared_sequences(self.conn, self.header.sub_account_id)
        await self._claim_numbers()
        if self.exported_plan is not None:
            kept = await self.conn.fetchval(
                "SELECT plan_id FROM control.sub_accounts WHERE id = $1", self.header.sub_account_id
            )
            self.report.plan_dropped = kept is None

    async def _claim_numbers(self) -> None:
        """The sub-account's active numbers enter the platform-wide directory (CONTRACT 9); a
        number another sub-account here holds refuses the import."""
        taken = await self.conn.fetch(
            CLAIM_NUMBERS.format(schema=_quote(self.header.schema_name)), self.header.sub_account_id
        )
        if taken:
            numbers = ", ".join(row["phone_number"] for row in taken)
            raise TenantOpError(
                f"phone number(s) {numbers} are held by another sub-account "
                "here; release them there first"
            )


def _insert_sql(table: str, columns: list[str]) -> str:
    spec = CONTROL_IMPORTS.get(table, ControlTable())
    target = table if table in CONTROL_IMPORTS else _quote(table)
    expressions = []
    for column in columns:
        if column == spec.user_column:
            expressions.append(f"COALESCE(m.existing, r.{_quote(column)})")
        else:
            expressions.append(spec.overrides.get(column, f"r.{_quote(column)}"))
    sql = (
        _PARAMS
        + f"INSERT INTO {target} ({', '.join(_quote(c) for c in columns)}) "
        + "OVERRIDING SYSTEM VALUE "
        + f"SELECT {', '.join(expressions)} FROM p, unnest($1::text[]) AS l(line) "
        + f"CROSS JOIN LATERAL json_populate_record(NULL::{target}, (l.line::json) -> 'row') "
        + "AS r"
    )
    if spec.user_column is not None:
        sql += (
            " LEFT JOIN unnest(p.user_from, p.user_to) AS m(exported, existing)"
            f" ON m.exported = r.{_quote(spec.user_column)}"
        )
    if spec.scope is not None:
        sql += f" WHERE {spec.scope}"
    return sql + spec.conflict
