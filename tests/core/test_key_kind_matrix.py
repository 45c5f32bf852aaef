"""Every keyed operation refuses every key it must not take (CONTRACT 2), from the route table.

The operations come from the app's own `url_map`: a view that `@requires(AGENCY)` or
`@requires(SUB_ACCOUNT)` is keyed with that kind; every other operation must be listed in EXEMPT
with its reason, so a new route is either covered by the matrix or a conscious exemption. Each
keyed operation is called with every wrong key (the other kind, missing, empty, another scheme,
malformed, unknown, revoked, of a suspended or deleted sub-account), its path parameters filled
with fresh UUIDs and a body of `{}`: each answer is 401 in the operation's error envelope, with
no rate-limit headers, and nothing in the database changes.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from api.auth import AGENCY, AUTH_ATTRIBUTE, SUB_ACCOUNT
from cli.wiring import build_app as create_app
from tenancy import tenant_ops
from tenancy.principals import insert_key
from tenancy.tables.base import control_metadata
from tests.factories import Agency, Tenant, issue_key, make_tenant
from tests.helpers import snapshot

API_PREFIXES = ("/webhooks/inbound", "/functions/v1")
# The operations agency keys serve (CONTRACT 2); sub-account keys serve every other keyed one.
AGENCY_OPERATIONS = (
    "/functions/v1/create-subaccount-webhook",
    "/functions/v1/crm-api/add-subaccount-user",
    "/functions/v1/agency/",
)

# Every operation that takes no API key, as "METHOD rule", with what guards it instead.
EXEMPT: dict[str, str] = {
    "GET /functions/v1/accept-invitation": "the invitation page: the invitation's token is the "
    "credential",
    "POST /functions/v1/accept-invitation": "the invitation's one-time token is the credential",
    "GET /recordings/<sub_account_id>/<call_id>.wav": "a signed, expiring recording link",
    "GET /track/open/<token>": "a signed tracking token in campaign email",
    "GET /track/click/<token>": "a signed tracking token in campaign email",
    "GET /track/unsubscribe/<token>": "a signed unsubscribe token in campaign email",
    "POST /track/unsubscribe/<token>": "a signed unsubscribe token (RFC 8058 one-click)",
    "POST /webhooks/providers/sandbox/sms/<sub_account_id>": "X-Sandbox-Signature",
    "POST /webhooks/providers/sandbox/calls/<sub_account_id>": "X-Sandbox-Signature",
    "POST /webhooks/providers/twilio/sms": "X-Twilio-Signature",
    "POST /webhooks/providers/twilio/status": "X-Twilio-Signature",
    "GET /healthz": "liveness probe, no data",
    "GET /readyz": "readiness probe, no data",
    "GET /metrics": "Prometheus metrics, no tenant data",
    "GET /openapi.json": "the public API description",
    "GET /docs": "the public API documentation page",
    "GET /docs/assets/<path:name>": "static Swagger UI files",
    "GET /static/<path:filename>": "Quart's static folder",
}


@dataclass(frozen=True)
class Operation:
    method: str
    rule: str
    kind: str | None

    @property
    def label(self) -> str:
        return f"{self.method} {self.rule}"

    def path(self) -> str:
        """The rule with every path parameter a fresh UUID."""
        path = self.rule
        while "<" in path:
            start = path.index("<")
            path = path[:start] + str(uuid.uuid4()) + path[path.index(">", start) + 1 :]
        return path


def _operations() -> list[Operation]:
    application = create_app()
    found = []
    for rule in application.url_map.iter_rules():
        kind = getattr(application.view_functions[rule.endpoint], AUTH_ATTRIBUTE, None)
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append(Operation(method, rule.rule, kind))
    return sorted(found, key=lambda operation: (operation.rule, operation.method))


OPERATIONS = _operations()
KEYED = [operation for operation in OPERATIONS if operation.kind is not None]


# --- coverage: the matrix follows the route table ---------------------------------------------


def test_every_operation_is_keyed_or_exempt() -> None:
    neither = [
        operation.label
        for operation in OPERATIONS
        if operation.kind is None and operation.label not in EXEMPT
    ]
    assert not neither, (
        "operations that take no key and are not in EXEMPT (add @requires, or "
        f"list them with the reason they need no key): {neither}"
    )


def test_every_exempt_entry_is_an_operation_that_takes_no_key() -> None:
    kinds = {operation.label: operation.kind for operation in OPERATIONS}
    stale = sorted(label for label in EXEMPT if label not in kinds)
    keyed = sorted(label for label in EXEMPT if kinds.get(label) is not None)
    assert not stale, f"EXEMPT names operations that no longer exist: {stale}"
    assert not keyed, f"EXEMPT names operations that take a key: {keyed}"
    assert all(EXEMPT.values())


def test_keyed_operations_are_the_api_and_take_the_kind_the_contract_says() -> None:
    assert len(KEYED) > 50, "the route table walk found too few keyed operations"
    for operation in KEYED:
        assert operation.rule.startswith(API_PREFIXES), operation.label
        expected = AGENCY if operation.rule.startswith(AGENCY_OPERATIONS) else SUB_ACCOUNT
        assert operation.kind == expected, operation.label
    assert {operation.kind for operation in KEYED} == {AGENCY, SUB_ACCOUNT}


# --- the wrong keys -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Keys:
    """The keys of one test: a sub-account and its agency, and the broken keys beside them."""

    tenant: Tenant
    agency: Agency
    pool: asyncpg.Pool
    client: Any


@dataclass(frozen=True)
class WrongKey:
    # (keys, kind of the operation) -> (headers, query string) of the request
    make: Callable[[Keys, str], Awaitable[tuple[dict[str, str], dict[str, str]]]]
    code: str
    kinds: tuple[str, ...] = (AGENCY, SUB_ACCOUNT)


def _right_key(keys: Keys, kind: str) -> str:
    return keys.agency.key if kind == AGENCY else keys.tenant.key


def _headers(
    value: Callable[[Keys, str], str], header: str = "x-api-key", scheme: str = ""
) -> Callable[[Keys, str], Awaitable[tuple[dict[str, str], dict[str, str]]]]:
    async def make(keys: Keys, kind: str) -> tuple[dict[str, str], dict[str, str]]:
        return {header: scheme + value(keys, kind)}, {}

    return make


async def _nothing(keys: Keys, kind: str) -> tuple[dict[str, str], dict[str, str]]:
    return {}, {}


async def _in_the_query(keys: Keys, kind: str) -> tuple[dict[str, str], dict[str, str]]:
    key = _right_key(keys, kind)
    return {}, {"api_key": key, "x-api-key": key}


async def _revoked(keys: Keys, kind: str) -> tuple[dict[str, str], dict[str, str]]:
    """A key of the right kind and owner, revoked before it was ever used."""
    async with keys.pool.acquire() as conn:
        if kind == AGENCY:
            key_id, key = await insert_key(conn, "agency", keys.agency.id, None, "revoked")
        else:
            key = await issue_key(keys.client, keys.agency.headers, keys.tenant.id)
            key_id = await conn.fetchval(
                "SELECT id FROM control.api_keys WHERE sub_account_id "
                "= $1 ORDER BY created_at DESC LIMIT 1",
                keys.tenant.id,
            )
        await conn.execute("UPDATE control.api_keys SET revoked_at = now() WHERE id = $1", key_id)
    return {"x-api-key": key}, {}


def _of_a_sub_account(
    change: Callable[[asyncpg.Pool, uuid.UUID], Awaitable[Any]],
) -> Callable[[Keys, str], Awaitable[tuple[dict[str, str], dict[str, str]]]]:
    async def make(keys: Keys, kind: str) -> tuple[dict[str, str], dict[str, str]]:
        other = await make_tenant(keys.client, keys.agency)
        await change(keys.pool, other.id)
        return other.headers, {}

    return make


WRONG_KEYS: dict[str, WrongKey] = {
    "agency key on a sub-account operation": WrongKey(
        _headers(lambda keys, kind: keys.agency.key), "invalid_api_key", (SUB_ACCOUNT,)
    ),
    "agency key as a bearer token on a sub-account operation": WrongKey(
        _headers(lambda keys, kind: keys.agency.key, "Authorization", "Bearer "),
        "invalid_api_key",
        (SUB_ACCOUNT,),
    ),
    "sub-account key on an agency operation": WrongKey(
        _headers(lambda keys, kind: keys.tenant.key), "invalid_api_key", (AGENCY,)
    ),
    "sub-account key as a bearer token on an agency operation": WrongKey(
        _headers(lambda keys, kind: keys.tenant.key, "Authorization", "Bearer "),
        "invalid_api_key",
        (AGENCY,),
    ),
    "no key": WrongKey(_nothing, "missing_api_key"),
    "an empty key": WrongKey(_headers(lambda keys, kind: ""), "missing_api_key"),
    "the right key under another scheme": WrongKey(
        _headers(_right_key, "Authorization", "Token "), "missing_api_key"
    ),
    "the right key in the query string": WrongKey(_in_the_query, "missing_api_key"),
    "a malformed key": WrongKey(_headers(lambda keys, kind: "not-a-key"), "invalid_api_key"),
    "a key too short": WrongKey(_headers(lambda keys, kind: "sb_" + "a" * 31), "invalid_api_key"),
    "a key too long": WrongKey(_headers(lambda keys, kind: "sb_" + "a" * 129), "invalid_api_key"),
    "the right key truncated": WrongKey(
        _headers(lambda keys, kind: _right_key(keys, kind)[:-1]), "invalid_api_key"
    ),
    "an unknown key": WrongKey(
        _headers(lambda keys, kind: "sb_" + secrets.token_urlsafe(32)), "invalid_api_key"
    ),
    "a revoked key": WrongKey(_revoked, "invalid_api_key"),
    "a key of a suspended sub-account": WrongKey(
        _of_a_sub_account(tenant_ops.suspend), "invalid_api_key", (SUB_ACCOUNT,)
    ),
    "a key of a deleted sub-account": WrongKey(
        _of_a_sub_account(tenant_ops.delete), "invalid_api_key", (SUB_ACCOUNT,)
    ),
}


async def database_state(pool: asyncpg.Pool, tenants: list[Tenant]) -> dict[str, Any]:
    """Every control table (as a digest) and every row of the tenants' schemas."""
    state: dict[str, Any] = {}
    for table in control_metadata.sorted_tables:
        state[table.fullname] = await pool.fetchval(
            f"SELECT count(*) || ':' || md5(coalesce(string_agg(x::text, '|' "
            f"ORDER BY x::text), '')) FROM {table.schema}.\"{table.name}\" AS x"
        )
    for tenant in tenants:
        state[str(tenant.id)] = await snapshot(pool, tenant)
    return state


@pytest.mark.parametrize("name", sorted(WRONG_KEYS))
async def test_every_keyed_operation_refuses_the_wrong_key(
    name: str, client: Any, pool: Any, tenant: Tenant
) -> None:
    wrong = WRONG_KEYS[name]
    keys = Keys(tenant, tenant.organisation, pool, client)
    requests = {kind: await wrong.make(keys, kind) for kind in wrong.kinds}
    tenants = [tenant]
    before = await database_state(pool, tenants)

    failures = []
    operations = [operation for operation in KEYED if operation.kind in wrong.kinds]
    for operation in operations:
        assert operation.kind is not None
        headers, query = requests[operation.kind]
        body = None if operation.method == "GET" else {}
        response = await client.open(
            operation.path(),
            method=operation.method,
            json=body,
            headers=headers,
            query_string=query or None,
        )
        text = await response.get_data(as_text=True)
        problem = _refusal_problem(operation, response, text, wrong.code)
        if problem:
            failures.append(f"{operation.label}: {problem}")

    assert not failures, f"{name}: {len(failures)} of {len(operations)}:\n" + "\n".join(failures)
    assert await database_state(pool, tenants) == before


def _refusal_problem(operation: Operation, response: Any, text: str, code: str) -> str | None:
    if response.status_code != 401:
        return f"answered {response.status_code}: {text[:300]}"
    try:
        body = json.loads(text)
    except ValueError:
        return f"not JSON: {text[:300]}"
    if operation.rule.startswith("/functions/v1"):
        envelope = body.get("success") is False and "status" not in body
    else:
        envelope = body.get("status") == "error" and "success" not in body
    error = body.get("error") or {}
    if not envelope or error.get("code") != code or not error.get("message"):
        return f"wrong envelope or code (expected {code}): {text[:300]}"
    limits = [name for name in response.headers.keys() if name.lower().startswith("ratelimit-")]
    if limits:
        return f"a 401 carries rate-limit headers {limits}"
    return None


async def test_the_right_key_passes_authentication_on_every_read(
    client: Any, tenant: Tenant
) -> None:
    """The control: the refusals above come from the key, not from the request itself."""
    failures = []
    for operation in KEYED:
        if operation.method != "GET":
            continue
        headers = tenant.organisation.headers if operation.kind == AGENCY else tenant.headers
        response = await client.get(operation.path(), headers=headers)
        if response.status_code in (401, 403) or response.status_code >= 500:
            failures.append(
                f"{operation.label}: {response.status_code} "
                f"{(await response.get_data(as_text=True))[:200]}"
            )
    assert not failures, "\n".join(failures)


async def test_the_keys_are_of_the_kinds_the_matrix_takes_them_for(
    pool: Any, tenant: Tenant
) -> None:
    rows = await pool.fetch(
        "SELECT kind, sub_account_id FROM control.api_keys WHERE organisation_id = $1",
        tenant.organisation.id,
    )
    assert {(row["kind"], row["sub_account_id"]) for row in rows} == {
        ("agency", None),
        ("sub_account", tenant.id),
    }
