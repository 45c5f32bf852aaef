"""Autogenerate the next control or tenant migration from the metadata, against a scratch database.

Usage: python scripts/new_migration.py control|tenant REV_ID "message"
Needs DATABASE_URL (any database on the server; a scratch database is made and dropped).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import asyncpg
from alembic import command

from tenancy.schema import alembic_config


async def _sql(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url)
    await conn.execute(statement)
    await conn.close()


def main() -> None:
    which, rev_id, message = sys.argv[1:4]
    admin = os.environ["DATABASE_URL"]
    name = f"scratch_{uuid.uuid4().hex[:8]}"
    asyncio.run(_sql(admin, f'CREATE DATABASE "{name}"'))
    url = admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        command.upgrade(alembic_config("control", url), "head")
        cfg = alembic_config(which, url)
        if which == "tenant":
            cfg.attributes["schema"] = "t_" + "0" * 32
            command.upgrade(cfg, "head")
        command.revision(cfg, message=message, autogenerate=True, rev_id=rev_id)
    finally:
        asyncio.run(_sql(admin, f'DROP DATABASE "{name}" WITH (FORCE)'))
    subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--fix", "-q", "migrations"], check=False
    )


if __name__ == "__main__":
    main()
