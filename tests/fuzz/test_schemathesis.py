"""Schemathesis against /openapi.json of a live `switchboard serve` on 127.0.0.1, real keys.

Every operation, a bounded number of generated examples each: no answer may be a 5xx, and every
answer must be one the document describes (status code, body schema, headers).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tenancy.embedded import free_port
from tests.conftest import make_agency

MAX_EXAMPLES = int(os.environ.get("SWITCHBOARD_FUZZ_EXAMPLES", "25"))
AGENCY_PATHS = ("/functions/v1/create-subaccount-webhook",
                "/functions/v1/crm-api/add-subaccount-user", "/functions/v1/agency/")


class Live:
    def __init__(self, base_url: str, agency_key: str, sub_account_key: str) -> None:
        self.base_url = base_url
        self.agency_key = agency_key
        self.sub_account_key = sub_account_key

    def headers_for(self, path: str) -> dict[str, str]:
        if path.startswith(AGENCY_PATHS):
            return {"x-api-key": self.agency_key}
        if path == "/functions/v1/accept-invitation":
            return {}
        return {"x-api-key": self.sub_account_key}


@pytest.fixture(scope="module")
def live(servers, mailbox, migrated) -> Iterator[Live]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": servers.database_url, "REDIS_URL": servers.redis_url,
           "SMTP_HOST": mailbox.host, "SMTP_PORT": str(mailbox.port),
           "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000", "SWITCHBOARD_LOG_FORMAT": "text",
           # Every answer is also checked against its declared model by the server itself.
           "SWITCHBOARD_VALIDATE_RESPONSES": "true"}
    process = subprocess.Popen([sys.executable, "-m", "cli", "serve", "--port", str(port)],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    # Operations that wait for provider jobs need a worker, as in production.
    worker = subprocess.Popen([sys.executable, "-m", "cli", "worker"], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        agency = asyncio.run(_agency(servers.database_url))
        created = httpx.post(f"{base}/functions/v1/create-subaccount-webhook",
                             json={"email": "fuzz-owner@example.com", "name": "Fuzz"},
                             headers={"x-api-key": agency.key}).json()
        key = httpx.post(
            f"{base}/functions/v1/agency/sub-accounts/{created['sub_account_id']}/api-keys",
            headers={"x-api-key": agency.key}).json()["api_key"]
        yield Live(base, agency.key, key)
    finally:
        worker.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        output = process.stderr.read()
        lines = output.splitlines()
        first = next((i for i, line in enumerate(lines)
                      if "Traceback" in line or " ERROR " in line), None)
        assert first is None, ("server logged errors during fuzzing:\n"
                               + "\n".join(lines[max(0, first - 3):first + 40]))


async def _agency(url: str) -> Any:
    from tenancy.db import create_pool

    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        return await make_agency(pool)
    finally:
        await pool.close()


def _openapi_document() -> dict[str, Any]:
    """The document the app serves, built in-process so the operations can parametrize tests."""
    from cli.wiring import build_app as create_app

    app = create_app()
    return app.extensions["QUART_SCHEMA"].openapi_provider.schema()  # type: ignore[no-any-return]


SCHEMA = schemathesis.openapi.from_dict(_openapi_document())
OPERATIONS = {
    f"{op.method.upper()} {op.path}": op
    for op in (result.ok() for result in SCHEMA.get_all_operations())
}


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_every_operation_answers_as_documented(label: str, live: Live) -> None:
    operation = OPERATIONS[label]

    @given(case=operation.as_strategy())
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.call_and_validate(
            base_url=live.base_url,
            headers=live.headers_for(case.path),
            checks=[not_a_server_error, status_code_conformance, content_type_conformance,
                    response_schema_conformance, response_headers_conformance],
        )

    run()
