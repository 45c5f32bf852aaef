"""`switchboard due-work`: list the due work set aside as failed, and run one item again."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from cli.arguments import uuid_argument
from tenancy import due

FIELDS = (
    "id",
    "sub_account_id",
    "kind",
    "ref_id",
    "failures",
    "attempts",
    "failed_at",
    "last_error",
)


def _run(work: Callable[[asyncpg.Pool], Awaitable[Any]]) -> Any:
    from tenancy.db import create_pool
    from tenancy.runtime import resolve_urls
    from tenancy.settings import get_settings

    database_url, _ = resolve_urls(get_settings())

    async def main() -> Any:
        pool = await create_pool(database_url, min_size=1, max_size=2)
        try:
            return await work(pool)
        finally:
            await pool.close()

    return asyncio.run(main())


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        from tenancy.clock import iso

        return iso(value)
    return str(value) if isinstance(value, uuid.UUID) else value


def cmd_failed(args: argparse.Namespace) -> int:
    rows = _run(lambda pool: due.list_failed(pool, args.sub_account))
    for row in rows:
        item = {name: _plain(row[name]) for name in FIELDS}
        if args.json:
            print(json.dumps(item))
        else:
            print(
                f"{item['id']}  {item['failed_at']}  sub_account={item['sub_account_id']}  "
                f"{item['kind']}:{item['ref_id']}  failures={item['failures']}  "
                f"{item['last_error']}"
            )
    print(f"{len(rows)} failed due-work items", file=sys.stderr)
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    if not _run(lambda pool: due.retry_failed(pool, args.due_work_id)):
        print(f"error: no failed due-work item {args.due_work_id}", file=sys.stderr)
        return 1
    print(f"due-work {args.due_work_id}: pending, runs now")
    return 0


def add_commands(sub: Any) -> None:
    group = sub.add_parser("due-work", help="due work that kept failing: list it, run it again")
    commands = group.add_subparsers(dest="due_work_command", required=True)
    failed = commands.add_parser("failed", help="one line (or JSON object) per failed item")
    failed.add_argument("--sub-account", type=uuid_argument, metavar="SUB_ACCOUNT_ID")
    failed.add_argument("--json", action="store_true", help="one JSON object per line")
    failed.set_defaults(func=cmd_failed)
    retry = commands.add_parser("retry", help="run one failed item again now")
    retry.add_argument("due_work_id", type=uuid_argument, metavar="DUE_WORK_ID")
    retry.set_defaults(func=cmd_retry)
