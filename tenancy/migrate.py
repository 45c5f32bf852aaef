"""Schema migrations: the control schema once, then every tenant schema, fanned out.

Each tenant is migrated in its own transaction that also records the new revision in
`control.sub_accounts.schema_version`, so the "who is behind head" question is one indexed query
however many schemas there are, and a re-run picks up exactly the tenants that failed or were
never reached. Alembic's `op` is a process-wide proxy, so tenants are migrated concurrently in
separate worker processes, each one tenant at a time.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from alembic import command
from alembic.runtime.environment import EnvironmentContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, pool, text

from tenancy.db import set_search_path_sync
from tenancy.schema import alembic_config, head_revision, sqlalchemy_url
from tenancy.tables import tenant_metadata


@dataclass
class MigrationReport:
    head: str
    total: int = 0
    migrated: list[uuid.UUID] = field(default_factory=list)
    failed: dict[uuid.UUID, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def upgrade_control(url: str) -> None:
    command.upgrade(alembic_config("control", url), "head")


def tenants_behind(
    url: str, head: str, only: Iterable[uuid.UUID] | None = None
) -> list[tuple[uuid.UUID, str]]:
    """Sub-accounts whose schema is not at `head`: one query, cheap at any tenant count."""
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    only_list = list(only) if only is not None else None
    sql = (
        "SELECT id, schema_name FROM control.sub_accounts "
        "WHERE schema_version IS DISTINCT FROM :head"
        + (" AND id = ANY(:only)" if only_list is not None else "")
        + " ORDER BY created_at, id"
    )
    params: dict[str, Any] = {"head": head}
    if only_list is not None:
        params["only"] = only_list
    with engine.connect() as conn:
        rows = conn.execute(text(sql), params).all()
    engine.dispose()
    return [(row[0], row[1]) for row in rows]


# -- worker-process side ---------------------------------------------------------------------

_engine: Any = None
_script: ScriptDirectory | None = None
_script_location: Path | None = None
_config: Any = None
# Tenants migrated on the worker's current connection, and how many it may serve before it is
# replaced: DDL on a schema loads all of its tables into the backend's catalog cache, which is
# never evicted (SWITCHBOARD_DB_CONNECTION_MAX_TENANTS, as for the asyncpg pools).
_served = 0
_budget = 0


def _worker_init(url: str, script_location: str | None) -> None:
    global _engine, _script, _script_location, _config, _budget
    from tenancy.settings import get_settings

    _budget = get_settings().db_connection_max_tenants
    # One kept connection per worker process: the tenants it migrates reuse it.
    _engine = create_engine(sqlalchemy_url(url), pool_size=1, max_overflow=0, pool_pre_ping=True)
    _script_location = Path(script_location) if script_location else None
    _config = alembic_config("tenant", script_location=_script_location)
    _script = ScriptDirectory.from_config(_config)


def _upgrade_schema(conn: Connection, schema: str, head: str) -> None:
    assert _script is not None and _config is not None
    cfg = _config

    def upgrade(rev: Any, context: Any) -> Any:
        return _script._upgrade_revs(head, rev)

    with EnvironmentContext(cfg, _script, fn=upgrade, destination_rev=head) as env:
        env.configure(
            connection=conn,
            target_metadata=tenant_metadata,
            version_table_schema=schema,
            transactional_ddl=True,
        )
        env.run_migrations()


def migrate_one(sub_account_id: uuid.UUID, schema: str, head: str) -> tuple[uuid.UUID, str | None]:
    """Migrate one tenant in one transaction; return its id and the error, if any."""
    try:
        with _engine.connect() as conn, conn.begin():
            set_search_path_sync(conn, schema)
            conn.execute(text("SELECT set_config('lock_timeout', '10s', true)"))
            _upgrade_schema(conn, schema, head)
            conn.execute(
                text(
                    "UPDATE control.sub_accounts SET schema_version = :head, updated_at = now() "
                    "WHERE id = :id"
                ),
                {"head": head, "id": sub_account_id},
            )
        return sub_account_id, None
    except Exception as exc:  # one tenant's failure is reported, never fatal to the others
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return sub_account_id, f"{type(exc).__name__}: {message}"
    finally:
        _retire_when_spent()


def _retire_when_spent() -> None:
    """Close the worker's connection once it has migrated its budget of tenants (between two
    tenants' transactions); the engine opens a new one for the next tenant."""
    global _served
    _served += 1
    if _budget and _served >= _budget:
        _engine.dispose()
        _served = 0


# -- coordinator -------------------------------------------------------------------------------


def migrate_tenants(
    url: str,
    *,
    concurrency: int = 4,
    only: Iterable[uuid.UUID] | None = None,
    script_location: Path | None = None,
    on_result: Callable[[uuid.UUID, str | None], None] | None = None,
) -> MigrationReport:
    head = head_revision("tenant", script_location)
    todo = tenants_behind(url, head, only)
    report = MigrationReport(head=head, total=len(todo))
    if not todo:
        return report
    workers = max(1, min(concurrency, len(todo)))
    location = str(script_location) if script_location else None
    with ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=_worker_init, initargs=(url, location)
    ) as executor:
        futures = [executor.submit(migrate_one, sid, schema, head) for sid, schema in todo]
        for future in as_completed(futures):
            sid, error = future.result()
            if error is None:
                report.migrated.append(sid)
            else:
                report.failed[sid] = error
            if on_result is not None:
                on_result(sid, error)
    return report


def run_cli(url: str, concurrency: int, tenants: list[uuid.UUID] | None) -> int:
    """`switchboard migrate`: progress bar on a terminal, one line per failure, exit 1 on any."""
    from tqdm import tqdm

    upgrade_control(url)
    print("control schema at head", file=sys.stderr)
    head = head_revision("tenant")
    behind = tenants_behind(url, head, tenants)
    if not behind:
        print(f"all tenant schemas at head {head}", file=sys.stderr)
        return 0
    interactive = sys.stderr.isatty()
    bar = tqdm(total=len(behind), unit="tenant", disable=not interactive, file=sys.stderr)

    done = 0
    step = max(1, len(behind) // 10)

    def on_result(sid: uuid.UUID, error: str | None) -> None:
        nonlocal done
        done += 1
        bar.update(1)
        if error is not None:
            line = f"FAILED {sid}: {error}"
            bar.write(line, file=sys.stderr) if interactive else print(line, file=sys.stderr)
        elif not interactive and (done % step == 0 or done == len(behind)):
            print(f"progress {done}/{len(behind)}", file=sys.stderr)

    report = migrate_tenants(url, concurrency=concurrency, only=tenants, on_result=on_result)
    bar.close()
    print(
        f"migrated {len(report.migrated)} of {report.total} tenant schemas to {head}; "
        f"{len(report.failed)} failed",
        file=sys.stderr,
    )
    return 0 if report.ok else 1
