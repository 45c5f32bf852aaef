"""Structured logs: one JSON object per line with request id and sub-account id, no secrets.

The request and tenant are carried in context variables that the API sets once per request,
so every log line written while serving it carries them. A redacting filter masks anything
shaped like one of our keys or webhook secrets, as a last line of defence.
"""

from __future__ import annotations

import atexit
import logging
import queue
import re
import sys
from contextvars import ContextVar
from logging.handlers import QueueHandler, QueueListener

from pythonjsonlogger.json import JsonFormatter

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
        if record.args:
            record.args = tuple(redact(a) if isinstance(a, str) else a
                                for a in (record.args if isinstance(record.args, tuple)
                                          else (record.args,)))
        return True


_listener: QueueListener | None = None


class _Enqueue(QueueHandler):
    """Hands the record over as it is: formatting happens on the writer thread."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


def configure_logging(fmt: str = "json", level: int = logging.INFO) -> None:
    """Log through a queue: the caller only enqueues the record (with its request and tenant
    ids, already redacted); a background thread formats and writes it, so a log line costs the
    event loop no system call."""
    global _listener
    # Records need no caller frame or thread: skipping them makes a log call cheap. (The process
    # id stays: hypercorn's own log format prints it.)
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(sub_account_id)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            timestamp=False))
    else:
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s [%(request_id)s %(sub_account_id)s] %(message)s"))
    if _listener is not None:
        _listener.stop()
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    front = _Enqueue(records)
    front.addFilter(ContextFilter())
    _listener = QueueListener(records, handler)
    _listener.start()
    atexit.register(_stop_listener)
    root = logging.getLogger()
    root.handlers[:] = [front]
    root.setLevel(level)
    # httpx logs every request's full URL at INFO; a webhook target's URL may carry credentials
    # (user:password@, ?token=). Deliveries are recorded per attempt in the database instead.
    logging.getLogger("httpx").setLevel(max(level, logging.WARNING))


def _stop_listener() -> None:
    """Write out whatever is still queued (on exit or a clean stop)."""
    global _listener
    if _listener is not None:
        _listener.stop()
        _listener = None
