"""Prometheus metrics at /metrics: requests, latency, jobs, queue depth, due-work lag, DB pool.

Request metrics are labelled by the route's rule (`/webhooks/inbound/contacts/<contact_id>`),
never the raw path, so ids do not explode the series. Job counters are kept in Redis by every
worker (jobs/metrics.py) and read here, so one scrape of any API replica sees all workers.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from quart import Blueprint, Response, current_app, request
from quart_schema import hide

from api.framework import unproxied
from tenancy.jobcounts import JOB_COUNTS_KEY

blueprint = Blueprint("metrics", __name__)
access_log = logging.getLogger("switchboard.access")

REGISTRY = CollectorRegistry(auto_describe=True)
REQUESTS = Counter(
    "switchboard_http_requests_total",
    "HTTP requests answered",
    ["method", "route", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "switchboard_http_request_duration_seconds",
    "HTTP request latency",
    ["method", "route"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
JOBS = Gauge(
    "switchboard_jobs_total",
    "Jobs run by the workers, by kind and outcome",
    ["kind", "outcome"],
    registry=REGISTRY,
)
# One arq queue per kind of work (jobs/worker.py): each is a sorted set named arq:queue[:kind].
QUEUE_DEPTH = Gauge(
    "switchboard_queue_depth", "Jobs waiting in an arq queue", ["queue"], registry=REGISTRY
)
DUE_LAG = Gauge(
    "switchboard_due_work_lag_seconds",
    "Age of the oldest due, unclaimed work item (0 when none)",
    registry=REGISTRY,
)
DUE_PENDING = Gauge("switchboard_due_work_pending", "Due, unclaimed work items", registry=REGISTRY)
POOL_SIZE = Gauge(
    "switchboard_db_pool_connections", "asyncpg pool connections", ["state"], registry=REGISTRY
)

DUE_WORK_LAG = """
SELECT count(*) AS pending,
       COALESCE(EXTRACT(EPOCH FROM now() - min(due_at)), 0) AS lag
FROM control.due_work
WHERE due_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
"""


_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe(response: Response, started: float | None) -> None:
    """Count the answered request, time it, and write its access-log line."""
    current = unproxied(request)
    url_rule = current.url_rule
    # A client may send any token as a method: an unknown one must not make a new series.
    method = current.method if current.method in KNOWN_METHODS else "other"
    rule = url_rule.rule if url_rule is not None else "unmatched"
    elapsed = time.perf_counter() - started if started is not None else 0.0
    status = response.status_code
    if rule != "/metrics":
        series = (method, rule, status)
        children = _children.get(series)
        if children is None:
            children = _children[series] = (
                REQUESTS.labels(method, rule, str(status)),
                LATENCY.labels(method, rule),
            )
        children[0].inc()
        children[1].observe(elapsed)
    if access_log.isEnabledFor(logging.INFO):
        # The record made directly: Logger.info would find no caller (logs.py turns that off)
        # and copy `extra` key by key, checking each against the record's own attributes.
        record = logging.LogRecord(
            access_log.name,
            logging.INFO,
            "(unknown file)",
            0,
            "%s %s %s",
            (method, rule, status),
            None,
        )
        record.__dict__.update(
            method=method, route=rule, status=status, duration_ms=round(elapsed * 1000, 2)
        )
        access_log.handle(record)


async def _collect() -> None:
    pool = current_app.config["DB_POOL"]
    POOL_SIZE.labels("total").set(pool.get_size())
    POOL_SIZE.labels("idle").set(pool.get_idle_size())
    POOL_SIZE.labels("in_use").set(pool.get_size() - pool.get_idle_size())
    try:
        row = await pool.fetchrow(DUE_WORK_LAG)
        DUE_PENDING.set(row["pending"])
        DUE_LAG.set(float(row["lag"]))
    except Exception:  # the gauges keep their last value while the database is away
        pass
    redis = current_app.config["REDIS"]
    try:
        async for key in redis.scan_iter(match="arq:queue*", _type="zset"):
            QUEUE_DEPTH.labels(key.decode()).set(await redis.zcard(key))
        for field, value in (await redis.hgetall(JOB_COUNTS_KEY)).items():
            kind, _, outcome = field.decode().rpartition(":")
            JOBS.labels(kind, outcome).set(int(value))
    except Exception:
        pass


@blueprint.get("/metrics")
@hide
async def metrics() -> Response:
    await _collect()
    return Response(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
