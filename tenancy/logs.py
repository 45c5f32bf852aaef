"""Structured logs: one JSON object per line with request id and sub-account id, no secrets.

The request and tenant are carried in context variables that the API sets once per request,
so every log line written while serving it carries them. A redacting filter masks anything
shaped like one of our keys or webhook secrets, as a last line of defence. The text format
(`switchboard dev` on a terminal, or SWITCHBOARD_LOG_FORMAT=text) is one line a person reads.
Routine lines that repeat while nothing happens (the due-work sweeper's run every 5 seconds,
alembic's set-up) are DEBUG, so an idle process is quiet at INFO.
"""

from __future__ import annotations

import atexit
import logging
import re
import sys
import threading
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from typing import TextIO

from pythonjsonlogger.orjson import OrjsonFormatter

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
sub_account_id_var: ContextVar[str | None] = ContextVar("sub_account_id", default=None)

SECRET = re.compile(r"(sb_|whsec_)[A-Za-z0-9_\-+/=]{8,}")


def redact(text: str) -> str:
    return SECRET.sub(lambda m: m.group(1) + "[redacted]", text)


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        record.sub_account_id = sub_account_id_var.get()
        if isinstance(record.msg, str) and SECRET.search(record.msg):
            record.msg = redact(record.msg)
        args = record.args
        if args:
            args = args if isinstance(args, tuple) else (args,)
            if any(isinstance(a, str) and SECRET.search(a) for a in args):
                record.args = tuple(redact(a) if isinstance(a, str) else a for a in args)
        return True


class TextFormatter(logging.Formatter):
    """time LEVEL logger: message, then `request_id=` and `sub_account_id=` when they are set
    (a traceback, if any, on the lines below)."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s",
            datefmt="%Y-%m-%d %H:%M:%S",
        )

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        ids = [
            f"{name}={value}"
            for name in ("request_id", "sub_account_id")
            if (value := getattr(record, name, None))
        ]
        return f"{line} [{' '.join(ids)}]" if ids else line


class Demote(logging.Filter):
    """On a logger: its INFO records that `routine` picks become DEBUG records, written only
    when DEBUG is on."""

    def __init__(self, routine: Callable[[logging.LogRecord], bool]) -> None:
        super().__init__()
        self.routine = routine

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not self.routine(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


# Cron runs are routine: due work is swept every 5 seconds (jobs/due.py SWEEP_DUE) and the
# housekeeping purges run every few minutes (cli/wiring.py), and arq logs each run's start and
# end. Those lines go to DEBUG; a purge that removes something says so itself, and a failed run
# is logged by arq at ERROR, which is never demoted. arq names cron jobs "cron:<function>".
QUIET_CRON_JOBS = frozenset({"sweep_due"})
CRON_JOB_PREFIX = "cron:"
ALEMBIC_SETUP = ("Context impl ", "Will assume ")


def _quiet_cron_run(record: logging.LogRecord) -> bool:
    # arq: "%6.2fs → %s(%s)%s" and "%6.2fs ← %s ● %s", the job's reference second.
    args = record.args
    return (
        isinstance(args, tuple)
        and len(args) > 1
        and isinstance(args[1], str)
        and (args[1] in QUIET_CRON_JOBS or args[1].startswith(CRON_JOB_PREFIX))
        and isinstance(record.msg, str)
        and record.msg.startswith("%6.2fs ")
    )


def _alembic_setup(record: logging.LogRecord) -> bool:
    return record.name == "alembic.runtime.plugins" or (
        isinstance(record.msg, str) and record.msg.startswith(ALEMBIC_SETUP)
    )


DEMOTED = {
    "arq.worker": Demote(_quiet_cron_run),
    "alembic.runtime.plugins": Demote(_alembic_setup),
    "alembic.runtime.migration": Demote(_alembic_setup),
}


class _Buffer(logging.Handler):
    """Keeps each record for the writer thread: one append, no lock, no wake-up per line."""

    def __init__(self) -> None:
        super().__init__()
        self.records: deque[logging.LogRecord] = deque()

    def handle(self, record: logging.LogRecord) -> bool:
        if self.filter(record):
            self.records.append(record)
            return True
        return False

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _Writer(threading.Thread):
    """Formats and writes the buffered records every FLUSH_SECONDS (and at exit), so a log line
    costs the event loop neither a system call nor a thread switch."""

    FLUSH_SECONDS = 0.05

    def __init__(self, buffer: _Buffer, target: logging.StreamHandler[TextIO]) -> None:
        super().__init__(name="switchboard-log-writer", daemon=True)
        self.buffer, self.target = buffer, target
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.FLUSH_SECONDS):
            self.flush()
        self.flush()

    def flush(self) -> None:
        """Format what is buffered and write it with one call (stderr is line-buffered, so
        handing it line by line would cost a system call per line)."""
        records = self.buffer.records
        lines = []
        while records:
            record = records.popleft()
            try:
                lines.append(self.target.format(record))
            except Exception:  # noqa: BLE001 - logging must never take the process down
                self.target.handleError(record)
        if lines:
            try:
                self.target.stream.write("\n".join(lines) + "\n")
                self.target.flush()
            except Exception:  # noqa: BLE001
                pass

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


_writer: _Writer | None = None


def configure_logging(fmt: str = "json", level: int = logging.INFO) -> None:
    """Log through a buffer: the caller only appends the record (with its request and tenant
    ids, already redacted); a background thread formats and writes the lines in batches."""
    global _writer
    # Records need no caller frame or thread: skipping them makes a log call cheap. (The process
    # id stays: hypercorn's own log format prints it.)
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(
            OrjsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(sub_account_id)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                timestamp=False,
            )
        )
    else:
        handler.setFormatter(TextFormatter())
    if _writer is not None:
        _writer.stop()
    front = _Buffer()
    front.addFilter(ContextFilter())
    _writer = _Writer(front, handler)
    _writer.start()
    atexit.register(_stop_writer)
    root = logging.getLogger()
    root.handlers[:] = [front]
    root.setLevel(level)
    # httpx logs every request's full URL at INFO; a webhook target's URL may carry credentials
    # (user:password@, ?token=). Deliveries are recorded per attempt in the database instead.
    logging.getLogger("httpx").setLevel(max(level, logging.WARNING))
    # alembic announces each plugin it loads at INFO: noise before every CLI command's answer.
    for name, demote in DEMOTED.items():
        logging.getLogger(name).addFilter(demote)


def _stop_writer() -> None:
    """Write out whatever is still buffered (on exit or a clean stop)."""
    global _writer
    if _writer is not None:
        _writer.stop()
        _writer = None
