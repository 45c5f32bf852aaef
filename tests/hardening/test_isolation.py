"""Tenant isolation, proven for every id-taking route of the app's own route table.

Each rule that takes an id has an entry in ROUTES: a factory that creates sub-account B's real
record through the API with B's key, and the answer the caller must get. The caller is
sub-account A (or A's agency). Every method of the rule is called on B's record; the answer is
the spec's missing-record answer, the body names nothing of B, and B is unchanged afterwards.
A rule with an id and no entry, or an entry for a rule that is gone, fails the coverage test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from cli.wiring import build_app as create_app
from tenancy.clock import utcnow
from tests.factories import Tenant
from tests.helpers import snapshot

BASE = "/webhooks/inbound"


@dataclass
class Record:
    """B's record: the values of the rule's path parameters, and every B value to look for."""

    params: dict[str, str]
    secrets: set[str] = field(default_factory=set)


Factory = Callable[[Any, Tenant], Awaitable[Record]]


@dataclass
class Entry:
    kind: str  # "sub_account" (A's key), "agency" (A's agency key), "token", "exempt"
    make: Factory | None = None
    status: int = 404
    bodies: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    worker: bool = False  # the factory needs the telephony worker running
    query: str = ""  # a query string the rule needs to reach its record (free-slots' days)


# --- factories: B's real records, made through the API with B's key ---------------------------


def _b_values(tenant: Tenant) -> set[str]:
    return {str(tenant.id), tenant.slug, tenant.owner_email, tenant.key}


async def _post(client: Any, tenant: Tenant, path: str, body: Any, status: int = 201) -> Any:
    response = await client.post(path, json=body, headers=tenant.headers)
    assert response.status_code == status, (path, await response.get_data(as_text=True))
    return await response.get_json()


async def contact(client: Any, b: Tenant) -> Record:
    email = f"bee-{uuid.uuid4().hex[:10]}@example.org"
    phone = "+14155550142"
    body = await _post(
        client,
        b,
        f"{BASE}/contacts",
        {"first_name": "Beatrix", "last_name": "Secretname", "email": email, "phone": phone},
    )
    contact_id = body["contact_id"]
    return Record(
        {"contact_id": contact_id},
        {contact_id, email, "Beatrix", "Secretname", phone} | _b_values(b),
    )


async def note(client: Any, b: Tenant) -> Record:
    record = await contact(client, b)
    body = await _post(
        client,
        b,
        f"{BASE}/contacts/{record.params['contact_id']}/notes",
        {"content": "B's private note"},
    )
    note_id = body["note"]["id"]
    record.params["note_id"] = note_id
    record.secrets |= {note_id, "B's private note"}
    return record


async def agent(client: Any, b: Tenant) -> Record:
    from tests.factories import make_agent

    agent_id = await make_agent(client, b, name="Beatrix agent")
    return Record({"agent_id": agent_id}, {agent_id, "Beatrix agent"} | _b_values(b))


async def phone_number(client: Any, b: Tenant) -> Record:
    from tests.factories import import_number

    number = "+14155550166"
    number_id = await import_number(client, b, number)
    record = await agent(client, b)
    record.params["number_id"] = number_id
    record.secrets |= {number_id, number}
    return record


async def number_pool(client: Any, b: Tenant) -> Record:
    record = await phone_number(client, b)
    body = await _post(
        client,
        b,
        f"{BASE}/number-pools",
        {"name": "Beatrix pool", "phone_number_ids": [record.params["number_id"]]},
    )
    record.params["pool_id"] = body["pool"]["id"]
    record.secrets |= {body["pool"]["id"], "Beatrix pool"}
    return record


async def _placed_call(client: Any, b: Tenant, **extra: Any) -> Record:
    """B's call from B's agent (with a number) to B's contact, placed with `extra` too."""
    from tests.factories import assign

    record = await phone_number(client, b)
    assert (
        await assign(client, b, record.params["number_id"], record.params["agent_id"])
    ).status_code == 200
    person = await contact(client, b)
    body = await _post(
        client,
        b,
        f"{BASE}/contacts/{person.params['contact_id']}/call",
        {"agent_id": record.params["agent_id"], **extra},
        status=200,
    )
    record.params |= {"call_id": body["call_id"], **person.params}
    record.secrets |= person.secrets | {body["call_id"]}
    return record


async def call(client: Any, b: Tenant) -> Record:
    record = await _placed_call(client, b)
    await _call_ended(client, b, record.params["call_id"])
    return record


async def _call_ended(client: Any, b: Tenant, call_id: str) -> None:
    """Wait for the sandbox call to finish, so that B's snapshot stays still."""
    import asyncio

    async with asyncio.timeout(90):
        while True:
            response = await client.get(f"{BASE}/calls/{call_id}", headers=b.headers)
            if (await response.get_json())["call"]["status"] in ("completed", "failed"):
                return
            await asyncio.sleep(0.1)


async def scheduled_call(client: Any, b: Tenant) -> Record:
    """B's call scheduled a day ahead (CONTRACT 10 start_at): still cancellable by B."""
    return await _placed_call(client, b, start_at=(utcnow() + timedelta(days=1)).isoformat())


async def scheduled_message(client: Any, b: Tenant) -> Record:
    """B's text scheduled a day ahead (CONTRACT 10 send_at): still cancellable by B."""
    record = await contact(client, b)
    send_at = (utcnow() + timedelta(days=1)).isoformat()
    body = await _post(
        client,
        b,
        f"{BASE}/contacts/{record.params['contact_id']}/messages",
        {"message_type": "sms", "content": "B's scheduled message", "send_at": send_at},
    )
    message_id = body["message"]["id"]
    record.params["message_id"] = message_id
    record.secrets |= {message_id, body["message"]["conversation_id"], "B's scheduled message"}
    return record


async def contact_with_agent(client: Any, b: Tenant) -> Record:
    """A contact, and B's agent for bodies that name one."""
    person = await contact(client, b)
    record = await agent(client, b)
    person.params |= record.params
    person.secrets |= record.secrets
    return person


async def conversation(client: Any, b: Tenant) -> Record:
    record = await contact(client, b)
    await _post(
        client,
        b,
        f"{BASE}/contacts/{record.params['contact_id']}/messages",
        {"message_type": "sms", "content": "B's private message"},
    )
    record.secrets.add("B's private message")
    return record


async def conversation_thread(client: Any, b: Tenant) -> Record:
    """B's conversation: an outbound text and an unread inbound one (so mark-read would show)."""
    from api.conversations.signing import HEADER, sign

    record = await contact(client, b)
    body = await _post(
        client,
        b,
        f"{BASE}/contacts/{record.params['contact_id']}/messages",
        {"message_type": "sms", "content": "B's private message"},
    )
    conversation_id = body["message"]["conversation_id"]
    raw = json.dumps(
        {"from": "+14155550142", "body": "B's private reply", "message_id": f"SM{uuid.uuid4().hex}"}
    ).encode()
    response = await client.post(
        f"/webhooks/providers/sandbox/sms/{b.id}",
        data=raw,
        headers={"Content-Type": "application/json", HEADER: sign(b.id, raw)},
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    record.params["conversation_id"] = conversation_id
    record.secrets |= {conversation_id, "B's private message", "B's private reply"}
    return record


async def invoice(client: Any, b: Tenant) -> Record:
    record = await contact(client, b)
    body = await _post(
        client,
        b,
        f"{BASE}/invoices",
        {
            "contact_id": record.params["contact_id"],
            "due_date": "2026-12-31",
            "items": [{"item": "Beatrix consulting", "quantity": 1, "amount": 10}],
            "notes": "B's invoice note",
        },
    )
    invoice_id = body["invoice"]["id"]
    record.params["invoice_id"] = invoice_id
    record.secrets |= {
        invoice_id,
        body["invoice"]["invoice_number"],
        "Beatrix consulting",
        "B's invoice note",
    }
    return record


async def campaign(client: Any, b: Tenant) -> Record:
    person = await contact(client, b)
    body = await _post(
        client,
        b,
        f"{BASE}/campaigns",
        {
            "name": "Beatrix campaign",
            "campaign_type": "email",
            "subject": "B's subject",
            "message_content": "<p>B's content</p>",
            "contact_ids": [person.params["contact_id"]],
        },
    )
    campaign_id = body["campaign"]["id"]
    return Record(
        {"campaign_id": campaign_id},
        person.secrets | {campaign_id, "Beatrix campaign", "B's subject"},
    )


async def paused_campaign(client: Any, b: Tenant) -> Record:
    """A campaign in the one state resume accepts, so only the tenant check can refuse it."""
    from tenancy.db import tenant_transaction

    record = await campaign(client, b)
    pool = client.app.config["DB_POOL"]
    async with tenant_transaction(pool, b.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET status = 'paused' WHERE id = $1",
            uuid.UUID(record.params["campaign_id"]),
        )
    return record


async def smart_list(client: Any, b: Tenant) -> Record:
    body = await _post(
        client, b, f"{BASE}/smart-lists", {"name": "Beatrix list", "tags": ["b-vip"]}
    )
    list_id = body["smart_list"]["id"]
    return Record({"smart_list_id": list_id}, {list_id, "Beatrix list", "b-vip"} | _b_values(b))


async def subscription(client: Any, b: Tenant) -> Record:
    url = f"https://b-{uuid.uuid4().hex[:8]}.example.org/hook"
    body = await _post(
        client, b, f"{BASE}/webhook-subscriptions", {"url": url, "events": ["contact.updated"]}
    )
    sub = body["subscription"]
    return Record({"subscription_id": sub["id"]}, {sub["id"], url, sub["secret"]} | _b_values(b))


async def delivery(client: Any, b: Tenant) -> Record:
    """A subscription with one finished delivery (of B's contact.created), so only the tenant
    check can refuse a redelivery."""
    from tenancy.db import tenant_transaction

    url = f"https://b-{uuid.uuid4().hex[:8]}.example.org/hook"
    sub = (await _post(client, b, f"{BASE}/webhook-subscriptions", {"url": url, "events": ["*"]}))[
        "subscription"
    ]
    person = await contact(client, b)
    async with tenant_transaction(client.app.config["DB_POOL"], b.schema) as conn:
        await conn.execute("UPDATE webhook_deliveries SET status = 'delivered'")
    log = await client.get(
        f"{BASE}/webhook-subscriptions/{sub['id']}/deliveries", headers=b.headers
    )
    [shown] = (await log.get_json())["deliveries"]
    return Record(
        {"subscription_id": sub["id"], "delivery_id": shown["id"]},
        person.secrets | {sub["id"], url, sub["secret"], shown["id"], shown["event_id"]},
    )


async def tool(client: Any, b: Tenant) -> Record:
    """B's http tool, with a header value that must never show."""
    from tests.factories import make_tool

    url = f"https://b-{uuid.uuid4().hex[:8]}.example.org/tool"
    made = await make_tool(
        client,
        b,
        name="beatrix_lookup",
        config={"url": url, "headers": {"X-Key": "b-header-secret"}},
    )
    return Record(
        {"tool_id": made["id"]},
        {made["id"], "beatrix_lookup", url, made["secret"], "b-header-secret"} | _b_values(b),
    )


async def calendar(client: Any, b: Tenant) -> Record:
    body = await _post(
        client,
        b,
        f"{BASE}/calendars",
        {
            "name": "Beatrix calendar",
            "timezone": "Europe/Paris",
            "min_notice_minutes": 0,
            "availability": [
                {"day": day, "start": "09:00", "end": "17:00"}
                for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
            ],
        },
    )
    calendar_id = body["calendar"]["id"]
    return Record({"calendar_id": calendar_id}, {calendar_id, "Beatrix calendar"} | _b_values(b))


async def _first_free_slot(client: Any, tenant: Tenant, calendar_id: str) -> str:
    response = await client.get(
        f"{BASE}/calendars/{calendar_id}/free-slots",
        query_string={"from": SLOT_DAY, "to": SLOT_DAY},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    return str((await response.get_json())["slots"][0]["start"])


async def appointment(client: Any, b: Tenant) -> Record:
    record = await calendar(client, b)
    person = await contact(client, b)
    start = await _first_free_slot(client, b, record.params["calendar_id"])
    body = await _post(
        client,
        b,
        f"{BASE}/appointments",
        {
            "calendar_id": record.params["calendar_id"],
            "contact_id": person.params["contact_id"],
            "start": start,
            "title": "Beatrix appointment",
            "notes": "B's appointment notes",
        },
    )
    appointment_id = body["appointment"]["id"]
    record.params["appointment_id"] = appointment_id
    record.secrets |= person.secrets | {
        appointment_id,
        "Beatrix appointment",
        "B's appointment notes",
    }
    return record


async def sub_account(client: Any, b: Tenant) -> Record:
    return Record({"sub_account_id": str(b.id)}, _b_values(b))


# --- the table --------------------------------------------------------------------------------

FUTURE = (utcnow() + timedelta(days=30)).isoformat()
SLOT_DAY = (utcnow() + timedelta(days=3)).date().isoformat()

ROUTES: dict[str, Entry] = {
    f"{BASE}/contacts/<contact_id>": Entry(
        "sub_account", contact, bodies={"PATCH": {"first_name": "Mallory"}}
    ),
    f"{BASE}/contacts/<contact_id>/call": Entry(
        "sub_account", contact_with_agent, bodies={"POST": {"agent_id": "{agent_id}"}}, worker=True
    ),
    f"{BASE}/contacts/<contact_id>/consent": Entry(
        "sub_account", contact, bodies={"PUT": {"channel": "sms", "status": "revoked"}}
    ),
    f"{BASE}/contacts/<contact_id>/messages": Entry(
        "sub_account", contact, bodies={"POST": {"message_type": "sms", "content": "hi"}}
    ),
    f"{BASE}/contacts/<contact_id>/notes": Entry(
        "sub_account", note, bodies={"POST": {"content": "Mallory was here"}}
    ),
    f"{BASE}/contacts/<contact_id>/notes/<note_id>": Entry("sub_account", note),
    f"{BASE}/contacts/<contact_id>/tags": Entry(
        "sub_account",
        contact,
        bodies={"POST": {"tags": ["mallory"]}, "DELETE": {"tags": ["mallory"]}},
    ),
    f"{BASE}/agents/<agent_id>": Entry(
        "sub_account", agent, bodies={"PATCH": {"name": "Mallory"}}, worker=True
    ),
    f"{BASE}/calls/<call_id>": Entry("sub_account", call, worker=True),
    f"{BASE}/calls/<call_id>/cancel": Entry(
        "sub_account", scheduled_call, bodies={"POST": {}}, worker=True
    ),
    f"{BASE}/messages/<message_id>/cancel": Entry(
        "sub_account", scheduled_message, bodies={"POST": {}}
    ),
    f"{BASE}/campaigns/<campaign_id>": Entry("sub_account", campaign),
    f"{BASE}/campaigns/<campaign_id>/cancel": Entry("sub_account", campaign, bodies={"POST": {}}),
    f"{BASE}/campaigns/<campaign_id>/recipients": Entry("sub_account", campaign),
    f"{BASE}/campaigns/<campaign_id>/resume": Entry(
        "sub_account", paused_campaign, bodies={"POST": {}}
    ),
    f"{BASE}/campaigns/<campaign_id>/schedule": Entry(
        "sub_account", campaign, bodies={"POST": {"start_date": FUTURE}}
    ),
    f"{BASE}/conversations/<conversation_id>": Entry(
        "sub_account", conversation_thread, bodies={"PATCH": {"unread": False}}
    ),
    f"{BASE}/conversations/<conversation_id>/messages": Entry("sub_account", conversation_thread),
    f"{BASE}/invoices/<invoice_id>": Entry(
        "sub_account", invoice, bodies={"PATCH": {"status": "void"}}
    ),
    f"{BASE}/invoices/<invoice_id>/mark-paid": Entry(
        "sub_account", invoice, bodies={"POST": {"payment_method": "cash"}}
    ),
    f"{BASE}/invoices/<invoice_id>/payment-link": Entry(
        "sub_account", invoice, bodies={"POST": {}}
    ),
    f"{BASE}/number-pools/<pool_id>": Entry("sub_account", number_pool, worker=True),
    f"{BASE}/phone-numbers/<number_id>": Entry("sub_account", phone_number, worker=True),
    f"{BASE}/phone-numbers/<number_id>/agent": Entry(
        "sub_account", phone_number, bodies={"POST": {"agent_id": "{agent_id}"}}, worker=True
    ),
    f"{BASE}/smart-lists/<smart_list_id>": Entry("sub_account", smart_list),
    f"{BASE}/webhook-subscriptions/<subscription_id>": Entry("sub_account", subscription),
    f"{BASE}/webhook-subscriptions/<subscription_id>/deliveries": Entry("sub_account", delivery),
    f"{BASE}/webhook-deliveries/<delivery_id>/redeliver": Entry(
        "sub_account", delivery, bodies={"POST": {}}
    ),
    f"{BASE}/agents/<agent_id>/deliveries": Entry("sub_account", agent),
    f"{BASE}/calendars/<calendar_id>": Entry(
        "sub_account", calendar, bodies={"PATCH": {"name": "Mallory"}}
    ),
    f"{BASE}/calendars/<calendar_id>/free-slots": Entry(
        "sub_account", calendar, query=f"from={SLOT_DAY}&to={SLOT_DAY}"
    ),
    f"{BASE}/appointments/<appointment_id>": Entry(
        "sub_account", appointment, bodies={"PATCH": {"title": "Mallory"}}
    ),
    f"{BASE}/tools/<tool_id>": Entry("sub_account", tool, bodies={"PATCH": {"name": "mallory"}}),
    f"{BASE}/integrations/<provider>": Entry(
        "exempt",
        reason="the parameter is a provider name from a fixed list, not a record id; "
        "each sub-account's connection is its own",
    ),
    "/functions/v1/crm-api/get-contact-messages/<contact_id>": Entry("sub_account", conversation),
    "/functions/v1/agency/sub-accounts/<sub_account_id>/api-keys": Entry(
        "agency", sub_account, bodies={"POST": {}}
    ),
    "/functions/v1/agency/sub-accounts/<sub_account_id>/wallet/credit": Entry(
        "agency", sub_account, bodies={"POST": {"amount": 5}}
    ),
    "/recordings/<sub_account_id>/<call_id>.wav": Entry(
        "token",
        status=403,
        reason="a signed link, no API key: the signature covers both ids, "
        "so a link of one sub-account never opens another's call "
        "(tests/calls/test_recordings.py)",
    ),
    "/track/click/<token>": Entry("token"),
    "/track/open/<token>": Entry("token"),
    "/track/unsubscribe/<token>": Entry("token"),
    "/webhooks/providers/sandbox/sms/<sub_account_id>": Entry(
        "token",
        status=401,
        reason="signed by the provider, no API key: a signature made for "
        "one sub-account never verifies for another",
    ),
    "/webhooks/providers/sandbox/calls/<sub_account_id>": Entry(
        "token",
        status=401,
        reason="signed by the provider, no API key: a signature made for "
        "one sub-account never verifies for another",
    ),
    "/docs/assets/<path:name>": Entry("exempt", reason="static Swagger UI files, no tenant data"),
    "/static/<path:filename>": Entry("exempt", reason="Quart's static folder, no tenant data"),
}


def _rules() -> dict[str, set[str]]:
    """rule -> methods, for every rule of the app that has a path parameter."""
    rules: dict[str, set[str]] = {}
    for rule in create_app().url_map.iter_rules():
        if rule.arguments:
            rules.setdefault(rule.rule, set()).update((rule.methods or set()) - {"HEAD", "OPTIONS"})
    return rules


RULES = _rules()
KEYED = sorted(
    rule
    for rule, entry in ROUTES.items()
    if entry.kind in ("sub_account", "agency") and rule in RULES
)
WITHOUT_WORKER = [rule for rule in KEYED if not ROUTES[rule].worker]
WITH_WORKER = [rule for rule in KEYED if ROUTES[rule].worker]


# --- coverage ---------------------------------------------------------------------------------


def test_every_rule_with_an_id_has_an_isolation_entry() -> None:
    missing = sorted(set(RULES) - set(ROUTES))
    assert not missing, f"routes with a path parameter and no isolation entry: {missing}"


def test_every_isolation_entry_names_a_rule_that_exists() -> None:
    stale = sorted(set(ROUTES) - set(RULES))
    assert not stale, f"isolation entries for routes that no longer exist: {stale}"


def test_every_exempt_entry_says_why() -> None:
    for rule, entry in ROUTES.items():
        assert entry.kind in ("sub_account", "agency", "token", "exempt"), rule
        if entry.kind == "exempt":
            assert entry.reason, rule
        if entry.kind in ("sub_account", "agency"):
            assert entry.make is not None, rule


def test_keyed_rules_under_the_api_prefixes_are_not_exempt() -> None:
    for rule in RULES:
        if rule.startswith(("/webhooks/inbound", "/functions/v1")) and "<provider>" not in rule:
            assert ROUTES[rule].kind in ("sub_account", "agency"), rule


# --- the calls --------------------------------------------------------------------------------


def _fill(template: str, params: dict[str, str]) -> str:
    path = template
    for name, value in params.items():
        path = path.replace(f"<{name}>", value)
    assert "<" not in path, (template, params)
    return path


def _substitute(body: Any, params: dict[str, str]) -> Any:
    if isinstance(body, dict):
        return {key: _substitute(value, params) for key, value in body.items()}
    if isinstance(body, str) and body.startswith("{") and body.endswith("}"):
        return params[body[1:-1]]
    return body


@pytest.mark.parametrize("rule", WITHOUT_WORKER)
async def test_other_tenants_record_is_missing_on_every_method(
    rule: str, client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant
) -> None:
    await _assert_missing(rule, client, pool, tenant, tenant_second)


@pytest.mark.parametrize("rule", WITH_WORKER)
async def test_other_tenants_voice_record_is_missing_on_every_method(
    rule: str, client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant, worker: Any
) -> None:
    await _assert_missing(rule, client, pool, tenant, tenant_second)


async def _assert_missing(
    rule: str, client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant
) -> None:
    entry = ROUTES[rule]
    assert entry.make is not None
    record = await entry.make(client, tenant_second)
    path = _fill(rule, record.params) + (f"?{entry.query}" if entry.query else "")
    headers = tenant.headers if entry.kind == "sub_account" else tenant.organisation.headers
    before = await snapshot(pool, tenant_second)

    for method in sorted(RULES[rule]):
        body = _substitute(entry.bodies.get(method), record.params)
        response = await client.open(path, method=method, json=body, headers=headers)
        text = await response.get_data(as_text=True)

        assert response.status_code == entry.status, (method, path, text)
        envelope = json.loads(text)
        assert envelope.get("status") == "error" or envelope.get("success") is False, text
        if entry.status == 404:
            assert envelope["error"]["code"] == "not_found", text
        leaked = sorted(value for value in record.secrets if value and value in text)
        assert not leaked, (method, path, leaked, text)

    assert await snapshot(pool, tenant_second) == before


async def test_agency_key_of_another_organisation_cannot_add_users_to_its_sub_account(
    client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant
) -> None:
    before = await snapshot(pool, tenant_second)
    response = await client.post(
        "/functions/v1/crm-api/add-subaccount-user",
        headers=tenant.organisation.headers,
        json={
            "email": "mallory@example.com",
            "role": "sub_account_user",
            "sub_account_id": str(tenant_second.id),
        },
    )
    text = await response.get_data(as_text=True)
    assert response.status_code == 403, text
    assert (await response.get_json())["success"] is False
    assert not [
        value for value in _b_values(tenant_second) - {str(tenant_second.id)} if value in text
    ]
    assert await snapshot(pool, tenant_second) == before


async def test_sub_account_key_cannot_create_an_agent_in_another_sub_account(
    client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant
) -> None:
    from tests.factories import agent_body, connect

    await connect(client, tenant)
    before = await snapshot(pool, tenant_second)
    body = agent_body(tenant_second)
    response = await client.post(
        "/functions/v1/crm-api/create-agent", json=body, headers=tenant.headers
    )
    assert response.status_code == 403, await response.get_data(as_text=True)
    assert await snapshot(pool, tenant_second) == before


# --- routes signed instead of keyed -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["open", "click", "unsubscribe"])
async def test_forged_or_altered_tracking_token_is_404(
    kind: str, client: Any, pool: Any, tenant_second: Tenant
) -> None:
    from api.tracking.tokens import sign

    genuine = sign(kind, tenant_second.id, uuid.uuid4(), "https://example.com/x")
    body, _, mac = genuine.partition(".")
    altered = f"{body}.{'A' if mac[0] != 'A' else 'B'}{mac[1:]}"
    other_kind = sign(
        "open" if kind != "open" else "click",
        tenant_second.id,
        uuid.uuid4(),
        "https://example.com/x",
    )
    before = await snapshot(pool, tenant_second)
    for token in (altered, other_kind, "x.y", f"{body}.", uuid.uuid4().hex):
        response = await client.get(f"/track/{kind}/{token}")
        text = await response.get_data(as_text=True)
        assert response.status_code == 404, (token, text)
        assert str(tenant_second.id) not in text
    assert await snapshot(pool, tenant_second) == before


@pytest.mark.parametrize("kind", ["open", "click", "unsubscribe"])
async def test_genuine_tracking_token_shows_nothing_of_the_sub_account(
    kind: str, client: Any, tenant_second: Tenant
) -> None:
    from api.tracking.tokens import sign

    token = sign(kind, tenant_second.id, uuid.uuid4(), "https://example.com/x")
    response = await client.get(f"/track/{kind}/{token}")
    text = (await response.get_data(as_text=False)).decode("utf-8", "replace")
    text += " ".join(response.headers.values())
    assert response.status_code in (200, 302, 404), text
    assert not [value for value in _b_values(tenant_second) if value in text]


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("sms", {"from": "+14155550149", "body": "x", "message_id": "SMX"}),
        ("calls", {"from": "+14155550149", "to": "+14155550123"}),
    ],
)
async def test_sandbox_webhook_signed_for_another_sub_account_is_refused(
    client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant, kind: str, body: dict[str, str]
) -> None:
    from api.conversations.signing import HEADER, sign

    raw = json.dumps(body).encode()
    before = await snapshot(pool, tenant_second)
    for signature in (sign(tenant.id, raw), "v1=" + "0" * 64, None):
        headers = {"Content-Type": "application/json"}
        if signature:
            headers[HEADER] = signature
        response = await client.post(
            f"/webhooks/providers/sandbox/{kind}/{tenant_second.id}", data=raw, headers=headers
        )
        text = await response.get_data(as_text=True)
        assert (
            response.status_code
            == ROUTES[f"/webhooks/providers/sandbox/{kind}/<sub_account_id>"].status
        ), text
        assert not [
            value for value in _b_values(tenant_second) - {str(tenant_second.id)} if value in text
        ]
    assert await snapshot(pool, tenant_second) == before


# --- ids inside request bodies ----------------------------------------------------------------
#
# A body that names B's record (the contact of an invoice, the agent of a call, the numbers of a
# pool...) is answered as if the record did not exist, and neither sub-account changes. Every
# `*_id` / `*_ids` field of every request model has a case, or says why it needs none.


@dataclass
class BodyCase:
    method: str
    rule: str
    field: str
    # (A's key, A's tenant, B's tenant) -> the path, the body, and B's values that must not leak
    make: Callable[[Any, Tenant, Tenant], Awaitable[tuple[str, dict[str, Any], set[str]]]]
    status: int = 404
    code: str = "not_found"
    agency: bool = False
    worker: bool = False


async def _company_of(client: Any, b: Tenant) -> str:
    body = await _post(client, b, f"{BASE}/companies", {"name": "Beatrix Ltd"})
    return str(body["company"]["id"])


async def _user_of(client: Any, b: Tenant) -> str:
    pool = client.app.config["DB_POOL"]
    user_id = await pool.fetchval(
        "INSERT INTO control.users (email) VALUES ($1) RETURNING id",
        f"member-{uuid.uuid4().hex[:8]}@example.org",
    )
    await pool.execute(
        "INSERT INTO control.memberships (user_id, sub_account_id, role) "
        "VALUES ($1, $2, 'sub_account_user')",
        user_id,
        b.id,
    )
    return str(user_id)


# A case's request: (path, body naming B's record, B's values that must not come back).
Builder = Callable[..., Awaitable[tuple[str, dict[str, Any], set[str]]]]


def _contact_field(
    method: str, field_name: str, make_b: Callable[[Any, Tenant], Awaitable[str]]
) -> Builder:
    async def make(client: Any, a: Tenant, b: Tenant) -> tuple[str, dict[str, Any], set[str]]:
        b_id = await make_b(client, b)
        if method == "POST":
            return (
                f"{BASE}/contacts",
                {"email": f"a-{uuid.uuid4().hex[:8]}@example.com", field_name: b_id},
                {b_id},
            )
        a_contact = (await contact(client, a)).params["contact_id"]
        return f"{BASE}/contacts/{a_contact}", {field_name: b_id}, {b_id}

    return make


async def _invite_to_b(client: Any, a: Tenant, b: Tenant) -> tuple[str, dict[str, Any], set[str]]:
    return (
        "/functions/v1/crm-api/add-subaccount-user",
        {
            "email": f"x-{uuid.uuid4().hex[:8]}@example.com",
            "role": "sub_account_user",
            "sub_account_id": str(b.id),
        },
        _b_values(b) - {str(b.id)},
    )


def _agent_for(field_name: str) -> Builder:
    async def make(client: Any, a: Tenant, b: Tenant) -> tuple[str, dict[str, Any], set[str]]:
        from tests.factories import agent_body, connect

        await connect(client, a)
        value = str(b.id) if field_name == "sub_account_id" else str(b.organisation.id)
        return (
            "/functions/v1/crm-api/create-agent",
            agent_body(a, **{field_name: value}),
            _b_values(b) - {value},
        )

    return make


EMAIL_CAMPAIGN = {
    "name": "A",
    "campaign_type": "email",
    "subject": "S",
    "message_content": "<p>x</p>",
}


def _calling_with_b(field_name: str, *, campaign: bool) -> Builder:
    """A's call (POST /contacts/{id}/call) or call campaign of A's contact naming B's agent or
    B's number pool (then with A's own agent)."""

    async def make(client: Any, a: Tenant, b: Tenant) -> tuple[str, dict[str, Any], set[str]]:
        if field_name == "agent_id":
            b_record = await agent(client, b)
            a_contact = await contact(client, a)
            body: dict[str, Any] = {"agent_id": b_record.params["agent_id"]}
        else:
            b_record = await number_pool(client, b)
            a_contact = await contact_with_agent(client, a)
            body = {"agent_id": a_contact.params["agent_id"], "pool_id": b_record.params["pool_id"]}
        contact_id = a_contact.params["contact_id"]
        if campaign:
            body |= {"name": "A", "campaign_type": "call", "contact_ids": [contact_id]}
            return f"{BASE}/campaigns", body, b_record.secrets
        return f"{BASE}/contacts/{contact_id}/call", body, b_record.secrets

    return make


def _email_campaign_with_b(field_name: str) -> Builder:
    """A's email campaign whose audience is B's contact or B's smart list."""

    async def make(client: Any, a: Tenant, b: Tenant) -> tuple[str, dict[str, Any], set[str]]:
        if field_name == "contact_ids":
            b_record = await contact(client, b)
            value: Any = [b_record.params["contact_id"]]
        else:
            b_record = await smart_list(client, b)
            value = b_record.params["smart_list_id"]
        return f"{BASE}/campaigns", EMAIL_CAMPAIGN | {field_name: value}, b_record.secrets

    return make


async def _invoice_for_b_contact(
    client: Any, a: Tenant, b: Tenant
) -> tuple[str, dict[str, Any], set[str]]:
    b_contact = await contact(client, b)
    return (
        f"{BASE}/invoices",
        {
            "contact_id": b_contact.params["contact_id"],
            "due_date": "2026-12-31",
            "items": [{"item": "x", "quantity": 1, "amount": 1}],
        },
        b_contact.secrets,
    )


async def _invoice_moved_to_b_contact(
    client: Any, a: Tenant, b: Tenant
) -> tuple[str, dict[str, Any], set[str]]:
    b_contact = await contact(client, b)
    a_invoice = await invoice(client, a)
    return (
        f"{BASE}/invoices/{a_invoice.params['invoice_id']}",
        {"contact_id": b_contact.params["contact_id"]},
        b_contact.secrets,
    )


async def _appointment_in_b_calendar(
    client: Any, a: Tenant, b: Tenant
) -> tuple[str, dict[str, Any], set[str]]:
    b_calendar = await calendar(client, b)
    a_contact = (await contact(client, a)).params["contact_id"]
    start = await _first_free_slot(client, b, b_calendar.params["calendar_id"])
    return (
        f"{BASE}/appointments",
        {"calendar_id": b_calendar.params["calendar_id"], "contact_id": a_contact, "start": start},
        b_calendar.secrets,
    )


async def _appointment_for_b_contact(
    client: Any, a: Tenant, b: Tenant
) -> tuple[str, dict[str, Any], set[str]]:
    a_calendar = (await calendar(client, a)).params["calendar_id"]
    b_contact = await contact(client, b)
    start = await _first_free_slot(client, a, a_calendar)
    return (
        f"{BASE}/appointments",
        {"calendar_id": a_calendar, "contact_id": b_contact.params["contact_id"], "start": start},
        b_contact.secrets,
    )


async def _pool_of_b_numbers(
    client: Any, a: Tenant, b: Tenant
) -> tuple[str, dict[str, Any], set[str]]:
    b_number = await phone_number(client, b)
    return (
        f"{BASE}/number-pools",
        {"name": "A pool", "phone_number_ids": [b_number.params["number_id"]]},
        b_number.secrets,
    )


async def _assign_b_agent(
    client: Any, a: Tenant, b: Tenant
) -> tuple[str, dict[str, Any], set[str]]:
    from tests.factories import import_number

    b_agent = await agent(client, b)
    a_number = await import_number(client, a, "+14155550177")
    return (
        f"{BASE}/phone-numbers/{a_number}/agent",
        {"agent_id": b_agent.params["agent_id"]},
        b_agent.secrets,
    )


def _agent_with_b_tool(
    method: str,
) -> Builder:
    async def make(client: Any, a: Tenant, b: Tenant) -> tuple[str, dict[str, Any], set[str]]:
        from tests.factories import agent_body, connect

        b_tool = await tool(client, b)
        tool_ids = [b_tool.params["tool_id"]]
        if method == "POST":
            await connect(client, a)
            return (
                "/functions/v1/crm-api/create-agent",
                agent_body(a, tool_ids=tool_ids),
                b_tool.secrets,
            )
        a_agent = (await agent(client, a)).params["agent_id"]
        return f"{BASE}/agents/{a_agent}", {"tool_ids": tool_ids}, b_tool.secrets

    return make


BODY_CASES = [
    BodyCase(
        "POST",
        "/functions/v1/crm-api/add-subaccount-user",
        "sub_account_id",
        _invite_to_b,
        status=403,
        code="forbidden",
        agency=True,
    ),
    BodyCase(
        "POST",
        "/functions/v1/crm-api/create-agent",
        "sub_account_id",
        _agent_for("sub_account_id"),
        status=403,
        code="forbidden",
    ),
    BodyCase(
        "POST",
        "/functions/v1/crm-api/create-agent",
        "organization_id",
        _agent_for("organization_id"),
        status=403,
        code="forbidden",
    ),
    *(
        BodyCase(
            "POST",
            path,
            field_name,
            _calling_with_b(field_name, campaign=path.endswith("campaigns")),
            worker=field_name == "pool_id",
        )
        for path in (f"{BASE}/contacts/<contact_id>/call", f"{BASE}/campaigns")
        for field_name in ("agent_id", "pool_id")
    ),
    BodyCase("POST", f"{BASE}/campaigns", "contact_ids", _email_campaign_with_b("contact_ids")),
    BodyCase("POST", f"{BASE}/campaigns", "smart_list_id", _email_campaign_with_b("smart_list_id")),
    BodyCase(
        "POST",
        f"{BASE}/contacts",
        "company_id",
        _contact_field("POST", "company_id", _company_of),
        status=400,
        code="validation_error",
    ),
    BodyCase(
        "POST",
        f"{BASE}/contacts",
        "assigned_user_id",
        _contact_field("POST", "assigned_user_id", _user_of),
        status=400,
        code="validation_error",
    ),
    BodyCase(
        "PATCH",
        f"{BASE}/contacts/<contact_id>",
        "company_id",
        _contact_field("PATCH", "company_id", _company_of),
        status=400,
        code="validation_error",
    ),
    BodyCase(
        "PATCH",
        f"{BASE}/contacts/<contact_id>",
        "assigned_user_id",
        _contact_field("PATCH", "assigned_user_id", _user_of),
        status=400,
        code="validation_error",
    ),
    BodyCase("POST", f"{BASE}/invoices", "contact_id", _invoice_for_b_contact),
    BodyCase("POST", f"{BASE}/appointments", "calendar_id", _appointment_in_b_calendar),
    BodyCase("POST", f"{BASE}/appointments", "contact_id", _appointment_for_b_contact),
    BodyCase("PATCH", f"{BASE}/invoices/<invoice_id>", "contact_id", _invoice_moved_to_b_contact),
    BodyCase("POST", f"{BASE}/number-pools", "phone_number_ids", _pool_of_b_numbers, worker=True),
    BodyCase(
        "POST", f"{BASE}/phone-numbers/<number_id>/agent", "agent_id", _assign_b_agent, worker=True
    ),
    BodyCase("POST", "/functions/v1/crm-api/create-agent", "tool_ids", _agent_with_b_tool("POST")),
    BodyCase("PATCH", f"{BASE}/agents/<agent_id>", "tool_ids", _agent_with_b_tool("PATCH")),
]

# Fields named like ids that name no record of a sub-account.
BODY_EXEMPT = {
    ("POST", "/functions/v1/crm-api/create-agent", "voice_id"): "a voice of the speech vendor",
    ("PATCH", f"{BASE}/agents/<agent_id>", "voice_id"): "a voice of the speech vendor",
    ("POST", f"{BASE}/invoices", "quote_id"): "a reference to a quote kept outside Switchboard "
    "(stored as given; no quotes table to look up)",
}


def _body_id_fields() -> set[tuple[str, str, str]]:
    from quart_schema.validation import QUART_SCHEMA_REQUEST_ATTRIBUTE

    app = create_app()
    found = set()
    for rule in app.url_map.iter_rules():
        declared = getattr(app.view_functions[rule.endpoint], QUART_SCHEMA_REQUEST_ATTRIBUTE, None)
        if declared is None:
            continue
        for name in declared[0].model_fields:
            if name.endswith(("_id", "_ids")):
                found |= {
                    (method, rule.rule, name)
                    for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}
                }
    return found


def test_every_id_in_a_request_body_has_an_isolation_case() -> None:
    covered = {(case.method, case.rule, case.field) for case in BODY_CASES} | set(BODY_EXEMPT)
    fields = _body_id_fields()
    assert not fields - covered, f"body ids without an isolation case: {fields - covered}"
    assert not covered - fields, f"cases for body ids that no longer exist: {covered - fields}"


def _case_id(case: BodyCase) -> str:
    return f"{case.method} {case.rule} {case.field}"


async def _assert_body_id_refused(
    case: BodyCase, client: Any, pool: Any, a: Tenant, b: Tenant
) -> None:
    path, body, b_secrets = await case.make(client, a, b)
    before = (await snapshot(pool, a), await snapshot(pool, b))
    headers = a.organisation.headers if case.agency else a.headers

    response = await client.open(path, method=case.method, json=body, headers=headers)

    text = await response.get_data(as_text=True)
    assert response.status_code == case.status, (path, body, text)
    assert json.loads(text)["error"]["code"] == case.code, text
    # An id the caller sent may be named back to it; nothing else of B may show.
    sent = json.dumps(body)
    leaked = sorted(value for value in b_secrets if value and value in text and value not in sent)
    assert not leaked, (path, leaked, text)
    assert (await snapshot(pool, a), await snapshot(pool, b)) == before


@pytest.mark.parametrize("case", [c for c in BODY_CASES if not c.worker], ids=_case_id)
async def test_other_tenants_id_in_a_body_is_refused(
    case: BodyCase, client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant
) -> None:
    await _assert_body_id_refused(case, client, pool, tenant, tenant_second)


@pytest.mark.parametrize("case", [c for c in BODY_CASES if c.worker], ids=_case_id)
async def test_other_tenants_voice_id_in_a_body_is_refused(
    case: BodyCase, client: Any, pool: Any, tenant: Tenant, tenant_second: Tenant, worker: Any
) -> None:
    await _assert_body_id_refused(case, client, pool, tenant, tenant_second)
