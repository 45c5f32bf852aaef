"""The `switchboard` command line: dev, serve, worker, voice, migrate, create-organisation,
tenants."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import json
import logging
import os
import signal
import sys
import uuid
from typing import Any

from cli.arguments import uuid_argument
from tenancy.settings import get_settings

# The demo sub-account's owner: an address the API itself accepts (example.com is reserved for
# examples yet an ordinary domain; special-use ones such as .local and .test are refused).
DEMO_OWNER_EMAIL = "owner@demo.example.com"


def _urls() -> tuple[str, str]:
    from tenancy.runtime import pin_urls

    return pin_urls()


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _shutdown_event() -> asyncio.Event:
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, event.set)
    return event


async def _serve_api(
    host: str, port: int, stop: asyncio.Event, prefork_child: bool = False
) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from cli.wiring import build_app
    from tenancy import prefork

    config = Config()
    # A child of --workers listens on its own socket of the port's SO_REUSEPORT group.
    config.bind = (
        [f"fd://{prefork.listen(host, port).detach()}"] if prefork_child else [f"{host}:{port}"]
    )
    config.accesslog = None
    config.graceful_timeout = 10
    app = build_app()
    _settle_garbage_collector()
    _quiet_cancelled_connections()
    await serve(app, config, shutdown_trigger=stop.wait)


def _quiet_cancelled_connections() -> None:
    """A connection still busy when the graceful shutdown runs out is cancelled by hypercorn,
    and asyncio would log that cancellation as an error with its traceback: it is the stop that
    was asked for, so it is not logged."""
    loop = asyncio.get_running_loop()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not isinstance(context.get("exception"), asyncio.CancelledError):
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)


def _settle_garbage_collector() -> None:
    """Once the app is built: what is loaded by now (modules, models, routes) lives as long as
    the process, so freeze it out of the collector's reach. A full collection walked it all,
    about 75 ms with the event loop stopped: a pause that every request in flight waited out
    (the 100-170 ms spikes bench/scale saw about once a minute). Young objects are collected
    less often too; most are freed by reference counting before a collection would see them."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


async def _run_worker(
    database_url: str, redis_url: str, stop: asyncio.Event, burst: bool = False
) -> None:
    from arq.worker import Worker

    from cli.wiring import worker_settings
    from jobs.worker import serve

    def make_worker() -> Worker:
        return Worker(**worker_settings(database_url, redis_url, handle_signals=False, burst=burst))

    # Graceful stop: no queue takes new jobs, running ones may finish within the grace period;
    # whatever is cut off is retried by arq and is idempotent by design. Redis not answering, at
    # start or later, is no reason to exit: the worker waits for it (CONTRACT 11).
    await serve(make_worker, redis_url, stop, get_settings().worker_shutdown_grace_seconds)


def cmd_serve(args: argparse.Namespace) -> int:
    from tenancy.secrets_ops import production_problem, refuse_unless

    refuse_unless(production_problem(get_settings()))
    _urls()
    if args.workers > 1 and not args.prefork_child:
        from tenancy import prefork

        child = [
            "-m",
            "cli",
            "serve",
            "--host",
            args.host,
            "--port",
            str(args.port),
            "--prefork-child",
        ]
        return prefork.run(child, args.host, args.port, args.workers, grace_seconds=10)

    async def main() -> None:
        await _serve_api(args.host, args.port, _shutdown_event(), args.prefork_child)

    asyncio.run(main())
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from tenancy.secrets_ops import production_problem, refuse_unless

    refuse_unless(production_problem(get_settings()))
    database_url, redis_url = _urls()

    async def main() -> None:
        await _run_worker(database_url, redis_url, _shutdown_event(), burst=args.burst)

    asyncio.run(main())
    return 0


def _voice_address(settings: Any) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(settings.voice_url)
    return parts.hostname or "127.0.0.1", parts.port or 8100


def cmd_voice(args: argparse.Namespace) -> int:
    from tenancy.secrets_ops import production_problem, refuse_unless
    from voice.logs import route_pipecat_logs

    route_pipecat_logs(logging.getLogger().level)
    from voice.app import serve_voice

    settings = get_settings()
    refuse_unless(production_problem(settings))
    database_url, _ = _urls()
    default_host, default_port = _voice_address(settings)
    host, port = args.host or default_host, args.port or default_port
    processes = args.processes or settings.voice_processes
    if processes > 1 and not args.prefork_child:
        from tenancy import prefork

        child = ["-m", "cli", "voice", "--host", host, "--port", str(port), "--prefork-child"]
        return prefork.run(
            child, host, port, processes, grace_seconds=settings.voice_shutdown_grace_seconds
        )

    async def main() -> None:
        await serve_voice(settings, database_url, host, port, _shutdown_event(), args.prefork_child)

    asyncio.run(main())
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from tenancy.secrets_ops import refuse_unless, secrets_problem

    refuse_unless(secrets_problem(get_settings()))  # the migrations encrypt stored secrets
    from tenancy.db import session_url
    from tenancy.migrate import run_cli

    database_url, _ = _urls()
    tenants = [uuid.UUID(value) for value in args.tenant] if args.tenant else None
    return run_cli(session_url(database_url), args.concurrency, tenants)


def cmd_create_organisation(args: argparse.Namespace) -> int:
    from tenancy.db import create_pool
    from tenancy.organisations import create_organisation

    database_url, _ = _urls()

    async def main() -> tuple[uuid.UUID, str]:
        pool = await create_pool(database_url, min_size=1, max_size=2)
        try:
            return await create_organisation(
                pool, args.name, args.plan_type, args.max_sub_accounts, not args.inactive
            )
        finally:
            await pool.close()

    organisation_id, key = asyncio.run(main())
    print(json.dumps({"organisation_id": str(organisation_id), "agency_api_key": key}))
    return 0


def _port_taken(host: str, port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _taken_port_message(args: argparse.Namespace) -> str | None:
    """One line naming a port dev needs that something else holds, and how to choose another;
    checked before anything starts, so nothing is left behind."""
    if _port_taken(args.host, args.port):
        return (
            f"switchboard dev: port {args.port} on {args.host} is in use (another "
            f"`switchboard dev`?); choose another with `make run PORT={args.port + 1}` or "
            f"`switchboard dev --port {args.port + 1}`"
        )
    voice_host, voice_port = _voice_address(get_settings())
    if _port_taken(voice_host, voice_port):
        return (
            f"switchboard dev: the voice runtime's port {voice_port} on {voice_host} is in "
            f"use; choose another with SWITCHBOARD_VOICE_URL=ws://127.0.0.1:"
            f"{voice_port + 1}"
        )
    return None


def cmd_dev(args: argparse.Namespace) -> int:
    from cli import dev_mail
    from tenancy.runtime import pin, start_servers
    from tenancy.secrets_ops import ensure_dev_secrets

    taken = _taken_port_message(args)
    if taken is not None:
        print(taken, file=sys.stderr)
        return 1
    # Links the API hands out (recordings, tracking) point at this dev server unless set.
    os.environ.setdefault("SWITCHBOARD_PUBLIC_URL", f"http://127.0.0.1:{args.port}")
    get_settings.cache_clear()
    ensure_dev_secrets(get_settings().data_dir)
    catcher = None
    if not dev_mail.wants_real_server():
        catcher, maildir = dev_mail.start_mail_catcher(get_settings().data_dir)
        get_settings.cache_clear()
        print(
            f"mail catcher (a stand-in; set SMTP_HOST for a real server): every email sent "
            f"is kept in {maildir}",
            file=sys.stderr,
        )
    # The embedded servers this dev starts are stopped when it ends (Ctrl-C, SIGTERM, a failure).
    try:
        servers = pin(start_servers(get_settings()))
    except BaseException:
        if catcher is not None:
            catcher.stop()
        raise
    try:
        return _run_dev(args, servers.database_url, servers.redis_url)
    finally:
        if catcher is not None:
            catcher.stop()
        if servers.started:
            print("stopping the embedded PostgreSQL and Redis this dev started", file=sys.stderr)
        servers.stop()


def _run_dev(args: argparse.Namespace, database_url: str, redis_url: str) -> int:
    from tenancy.db import session_url
    from tenancy.migrate import run_cli

    if run_cli(session_url(database_url), 2, None) != 0:
        print("some tenant migrations failed; see above", file=sys.stderr)
    settings = get_settings()

    async def main() -> None:
        demo = await _ensure_demo(database_url, args.port, settings.data_dir)
        stop = _shutdown_event()
        from voice.logs import route_pipecat_logs

        route_pipecat_logs(logging.getLogger().level)
        from cli import dev_voice
        from voice.app import serve_voice

        voice_settings = settings
        if not dev_voice.wants_real_vendors():
            vendors = await dev_voice.start_fake_vendors()
            get_settings.cache_clear()
            voice_settings = get_settings()
            print(
                f"fake LLM and speech vendors (a stand-in; {dev_voice.REAL_VENDORS}=true for "
                f"real ones) at {vendors.origin}",
                file=sys.stderr,
            )
        voice_host, voice_port = _voice_address(voice_settings)
        work = [
            _serve_api(args.host, args.port, stop),
            _run_worker(database_url, redis_url, stop),
            serve_voice(voice_settings, database_url, voice_host, voice_port, stop),
        ]
        if demo is not None:
            work.append(_announce_demo_call(args.port, stop, *demo))
        await asyncio.gather(*work)

    print(f"DATABASE_URL={database_url}\nREDIS_URL={redis_url}", file=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


async def _announce_demo_call(
    port: int,
    stop: asyncio.Event,
    sub_account_id: uuid.UUID,
    organisation_id: uuid.UUID,
    sub_key: str,
    banner: str,
) -> None:
    """Once the API answers, the demo keys (printed now, so the curl they show works), then
    the demo agent, number and contact and the curl that places a first sandbox call. A stop
    signal before it is done abandons it (the API it talks to is going away)."""
    import httpx

    from cli.dev_voice import api_ready, make_demo_agent

    ready = asyncio.ensure_future(api_ready(f"http://127.0.0.1:{port}"))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([ready, stopping], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # dev is ending on a failure: the keys are shown all the same
        print(banner, file=sys.stderr)
        raise
    stopping.cancel()
    # The keys are shown once, whatever happened: they exist only in this banner.
    print(banner, file=sys.stderr)
    if not ready.done() or ready.exception() is not None:
        ready.cancel()
        return
    making = asyncio.ensure_future(
        make_demo_agent(f"http://127.0.0.1:{port}", sub_account_id, organisation_id, sub_key)
    )
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([making, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not making.done():
        making.cancel()
        print("stopped before the demo agent was made (make one through the API)", file=sys.stderr)
        return
    try:
        curl = making.result()
    except (RuntimeError, OSError, httpx.HTTPError) as exc:
        print(f"the demo agent could not be made: {exc}", file=sys.stderr)
        return
    print(
        "\nA demo agent with a sandbox number, and a contact who answers; call them:\n"
        f"  {curl}\n  then GET /webhooks/inbound/calls/<call_id> with the same key for the "
        "transcript and recording.\n",
        file=sys.stderr,
    )


async def _ensure_demo(
    database_url: str, port: int, data_dir: Any
) -> tuple[uuid.UUID, uuid.UUID, str, str] | None:
    """On first start, a demo organisation and sub-account: their ids, the sub-account key and
    the banner that shows the keys once (None when the demo data already existed)."""
    from tenancy.db import create_pool
    from tenancy.organisations import create_organisation
    from tenancy.principals import insert_key
    from tenancy.provisioning import NewSubAccount, provision_sub_account

    pool = await create_pool(database_url, min_size=1, max_size=4)
    try:
        if await pool.fetchval("SELECT count(*) FROM control.organisations") > 0:
            print(
                "demo data exists; its keys were shown once, on first start. For new keys: "
                "`switchboard create-organisation --name NAME` prints an agency key (then POST "
                "/functions/v1/create-subaccount-webhook and /functions/v1/agency/sub-accounts/"
                "{id}/api-keys), or `make clean && make run` starts afresh (deletes the data "
                "dir)",
                file=sys.stderr,
            )
            return None
        organisation_id, agency_key = await create_organisation(pool, "Demo Agency")
        result = await provision_sub_account(
            pool, organisation_id, NewSubAccount(DEMO_OWNER_EMAIL, "Demo Sub-Account", None, None)
        )
        async with pool.acquire() as conn:
            _, sub_key = await insert_key(
                conn, "sub_account", organisation_id, result["sub_account_id"], "demo key"
            )
    finally:
        await pool.close()
    banner = (
        "\nDemo organisation created (these keys are shown once):\n"
        f"  organisation_id:  {organisation_id}\n"
        f"  agency key:       {agency_key}\n"
        f"  sub_account_id:   {result['sub_account_id']}\n"
        f"  sub-account key:  {sub_key}\n\n"
        f"  curl -H 'x-api-key: {sub_key}' http://127.0.0.1:{port}/webhooks/inbound/team-users\n"
    )
    return result["sub_account_id"], organisation_id, sub_key, banner


def _tenant_op(work: Any) -> Any:
    """Run `work(pool)` against the database; a TenantOpError is printed and exits 1."""
    from tenancy.db import create_pool
    from tenancy.tenant_ops import TenantOpError

    database_url, _ = _urls()

    async def main() -> Any:
        pool = await create_pool(database_url, min_size=1, max_size=2)
        try:
            return await work(pool)
        finally:
            await pool.close()

    try:
        return asyncio.run(main())
    except TenantOpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_tenants_list(args: argparse.Namespace) -> int:
    from tenancy.clock import iso
    from tenancy.tenant_ops import list_tenants

    def plain(value: Any) -> Any:
        if isinstance(value, datetime.datetime):
            return iso(value)
        return str(value) if isinstance(value, uuid.UUID) else value

    rows = _tenant_op(lambda pool: list_tenants(pool, args.organisation, args.status))
    if args.json:
        print(
            json.dumps(
                [{key: plain(value) for key, value in row.items()} for row in rows], indent=2
            )
        )
        return 0
    print(
        f"{'SUB_ACCOUNT_ID':36}  {'STATUS':9}  {'SCHEMA_VERSION':14}  {'SIZE_BYTES':>12}  "
        f"{'SCHEMA':34}  NAME"
    )
    for row in rows:
        size = "-" if row["size_bytes"] is None else str(row["size_bytes"])
        print(
            f"{row['id']!s:36}  {row['status']:9}  {row['schema_version'] or '-':14}  "
            f"{size:>12}  {row['schema_name']:34}  {row['name']}"
        )
    return 0


def cmd_tenants_export(args: argparse.Namespace) -> int:
    from tenancy.files import FileRefused, new_private_file
    from tenancy.secrets_ops import refuse_unless, secrets_problem

    refuse_unless(secrets_problem(get_settings()))
    # Key hashes and encrypted secrets are inside: a new file, readable by the owner only.
    try:
        with new_private_file(args.out) as out:
            from tenancy.tenant_ops import export_tenant

            report = _tenant_op(lambda pool: export_tenant(pool, args.sub_account_id, out))
    except FileRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"exported sub-account {report.sub_account_id} at tenant schema "
        f"{report.schema_version}: {report.rows} rows and {report.recordings} call "
        f"recordings to {args.out}",
        file=sys.stderr,
    )
    return 0


def cmd_tenants_import(args: argparse.Namespace) -> int:
    from tenancy.secrets_ops import reencrypt_keys, refuse_unless, secrets_problem
    from tenancy.tenant_ops import import_tenant

    refuse_unless(secrets_problem(get_settings()))
    old_keys = reencrypt_keys(args.reencrypt) if args.reencrypt else None
    try:
        source = open(args.file, encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    with source:
        report = _tenant_op(lambda pool: import_tenant(pool, source, old_keys))
    print(
        f"imported sub-account {report.sub_account_id}: {report.rows} rows and "
        f"{report.recordings} call recordings",
        file=sys.stderr,
    )
    if report.users_matched:
        print(f"{report.users_matched} users matched existing users by email", file=sys.stderr)
    if report.plan_dropped:
        print("its plan does not exist here: the sub-account has no plan now", file=sys.stderr)
    return 0


def cmd_tenants_status(args: argparse.Namespace) -> int:
    from tenancy import tenant_ops
    from tenancy.clock import iso

    if args.tenants_command == "delete":
        change = _tenant_op(
            lambda pool: tenant_ops.delete(pool, args.sub_account_id, args.grace_days)
        )
    else:
        action = getattr(tenant_ops, args.tenants_command)
        change = _tenant_op(lambda pool: action(pool, args.sub_account_id))
    note = "" if change.changed else " (unchanged)"
    after = f"; schema purged after {iso(change.purge_after)}" if change.purge_after else ""
    print(f"sub-account {change.sub_account_id}: {change.status}{note}{after}")
    return 0


def cmd_tenants_purge(args: argparse.Namespace) -> int:
    from tenancy.tenant_ops import purge_due

    report = _tenant_op(lambda pool: purge_due(pool))
    for sub_account_id in report.purged:
        print(f"purged {sub_account_id}")
    for sub_account_id, error in report.failed.items():
        print(f"FAILED {sub_account_id}: {error}", file=sys.stderr)
    print(f"purged {len(report.purged)} sub-accounts; {len(report.failed)} failed", file=sys.stderr)
    return 1 if report.failed else 0


def _add_tenant_commands(sub: Any) -> None:
    tenants = sub.add_parser("tenants", help="list, export, import, suspend, delete sub-accounts")
    commands = tenants.add_subparsers(dest="tenants_command", required=True)

    listing = commands.add_parser("list", help="sub-accounts with schema version, status, size")
    listing.add_argument("--json", action="store_true", help="one JSON array on stdout")
    listing.add_argument("--organisation", type=uuid_argument, metavar="ORGANISATION_ID")
    listing.add_argument("--status", choices=["active", "suspended", "deleted"])
    listing.set_defaults(func=cmd_tenants_list)

    export = commands.add_parser("export", help="one sub-account's rows to a file")
    export.add_argument("sub_account_id", type=uuid_argument, metavar="SUB_ACCOUNT_ID")
    export.add_argument("--out", required=True, metavar="FILE")
    export.set_defaults(func=cmd_tenants_export)

    restore = commands.add_parser("import", help="recreate an exported sub-account")
    restore.add_argument("file", metavar="FILE")
    restore.add_argument(
        "--reencrypt",
        metavar="KEY_FILE",
        help="a file holding the exporting installation's "
        "SWITCHBOARD_SECRETS_KEY: its secrets are re-encrypted under ours",
    )
    restore.set_defaults(func=cmd_tenants_import)

    for name, text in (
        ("suspend", "its keys get 401 until resumed"),
        ("resume", "back to active (also undoes a delete before the purge)"),
        ("delete", "keys stop now; the schema is purged after the grace period"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("sub_account_id", type=uuid_argument, metavar="SUB_ACCOUNT_ID")
        if name == "delete":
            command.add_argument("--grace-days", type=int, default=7)
        command.set_defaults(func=cmd_tenants_status)

    purge = commands.add_parser("purge", help="drop deleted sub-accounts past their grace period")
    purge.set_defaults(func=cmd_tenants_purge)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="switchboard", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="embedded servers, migrations, API and worker together")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8000)
    dev.set_defaults(func=cmd_dev)

    serve = sub.add_parser("serve", help="the API only")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="server processes sharing the port (about one per core)",
    )
    serve.add_argument(
        "--prefork-child", action="store_true", help=argparse.SUPPRESS
    )  # a child of --workers
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="the arq worker only")
    worker.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    worker.set_defaults(func=cmd_worker)

    voice = sub.add_parser("voice", help="the voice runtime: carriers' media streams")
    voice.add_argument("--host", default=None, help="default: SWITCHBOARD_VOICE_URL's host")
    voice.add_argument(
        "--port", type=int, default=None, help="default: SWITCHBOARD_VOICE_URL's port (8100)"
    )
    voice.add_argument(
        "--processes",
        type=_positive,
        default=None,
        help="voice processes sharing the port, about one per core "
        "(default: SWITCHBOARD_VOICE_PROCESSES, 1)",
    )
    voice.add_argument(
        "--prefork-child", action="store_true", help=argparse.SUPPRESS
    )  # a child of --processes
    voice.set_defaults(func=cmd_voice)

    migrate = sub.add_parser("migrate", help="control schema, then every tenant schema")
    migrate.add_argument("--concurrency", type=int, default=4)
    migrate.add_argument("--tenant", action="append", metavar="SUB_ACCOUNT_ID")
    migrate.set_defaults(func=cmd_migrate)

    org = sub.add_parser("create-organisation", help="create an organisation and agency key")
    org.add_argument("--name", required=True)
    org.add_argument(
        "--plan-type", default="white_label", choices=["white_label", "saas", "standard"]
    )
    org.add_argument("--max-sub-accounts", type=int, default=100)
    org.add_argument("--inactive", action="store_true")
    org.set_defaults(func=cmd_create_organisation)

    _add_tenant_commands(sub)
    from cli.due_work import add_commands as add_due_work_commands
    from tenancy.secrets_ops import add_commands as add_secrets_commands

    add_due_work_commands(sub)
    add_secrets_commands(sub)
    return parser


def log_format(command: str | None) -> str:
    """SWITCHBOARD_LOG_FORMAT when it is set; else text for `dev` writing to a terminal (a
    person reads it), and JSON for everything else (a collector reads it)."""
    settings = get_settings()
    if "log_format" in settings.model_fields_set:
        return settings.log_format
    return "text" if command == "dev" and sys.stderr.isatty() else "json"


def main(argv: list[str] | None = None) -> int:
    from tenancy.logs import configure_logging

    args = build_parser().parse_args(argv)
    configure_logging(log_format(args.command))
    if getattr(args, "tenant", None):
        for value in args.tenant:
            try:
                uuid.UUID(value)
            except ValueError:
                print(f"not a sub-account id: {value}", file=sys.stderr)
                return 2
    if args.command not in ("serve", "worker"):
        from tenancy.secrets_ops import use_kept_dev_secrets

        use_kept_dev_secrets(get_settings().data_dir)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
