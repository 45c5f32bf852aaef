"""Bad input everywhere: oversized, deeply nested, mistyped and strange bodies get a 4xx in the
envelope and change nothing; odd but storable text is stored and returned exactly."""

from __future__ import annotations

import json
import socket
import uuid
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tenancy.settings import get_settings
from tests.factories import Tenant
from tests.helpers import Live, error_code, snapshot

BASE = "/webhooks/inbound"
CONTACTS = f"{BASE}/contacts"
SQL_META = [
    "'; DROP TABLE contacts; --",
    "100% off",
    "snake_case_",
    "back\\slash\\",
    "$1 $2::text",
    "\"quoted\" 'single'",
    "%_\\%",
]
UNICODE = [
    "emoji 😀👩‍👩‍👧‍👦",
    "مرحبا بالعالم",
    "e\u0301\u0301 combining",
    "\u202eRTL override",
    "zero\u200bwidth",
    "𝕳𝖆𝖑𝖑𝖔 astral",
    "\ufeffbom",
]


async def contact_count(pool: Any, tenant: Tenant) -> int:
    return len((await snapshot(pool, tenant))["contacts"])


def email() -> str:
    return f"bad-{uuid.uuid4().hex[:10]}@example.com"


# --- size -------------------------------------------------------------------------------------


async def test_body_over_the_limit_is_413(client: Any, pool: Any, tenant: Tenant) -> None:
    limit = get_settings().max_body_bytes
    body = json.dumps({"email": email(), "address": "x" * limit}).encode()
    response = await client.post(
        CONTACTS, data=body, headers={**tenant.headers, "Content-Type": "application/json"}
    )
    assert await error_code(response, 413) == "payload_too_large"
    assert await contact_count(pool, tenant) == 0


def _raw_request(live: Live, head: str, body: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (a lying Content-Length, chunks without a length)."""
    url = urlparse(live.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        try:
            sock.sendall(head.encode() + body)
        except OSError:
            pass  # the server may answer and close before reading everything
        received = b""
        while b"\r\n\r\n" not in received or len(received) < 12:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            received += chunk
    status = int(received.split(b" ", 2)[1])
    return status, received.partition(b"\r\n\r\n")[2]


def _live_tenant_key(live: Live, agency_key: str) -> str:
    created = httpx.post(
        f"{live.base_url}/functions/v1/create-subaccount-webhook",
        json={"email": email(), "name": "Bad input"},
        headers={"x-api-key": agency_key},
    ).json()
    return str(
        httpx.post(
            f"{live.base_url}/functions/v1/agency/sub-accounts/{created['sub_account_id']}/api-keys",
            headers={"x-api-key": agency_key},
        ).json()["api_key"]
    )


def _chunked(body: bytes, size: int = 65536) -> bytes:
    out = b""
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def test_live_body_over_the_limit_is_413_even_when_content_length_lies(
    live: Live, agency: Any
) -> None:
    key = _live_tenant_key(live, agency.key)
    limit = get_settings().max_body_bytes
    body = json.dumps({"email": email(), "address": "x" * (limit + 10)}).encode()
    head = (
        f"POST {CONTACTS} HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\n"
        f"Content-Type: application/json\r\nConnection: close\r\n"
    )

    status, answer = _raw_request(live, head + f"Content-Length: {len(body)}\r\n\r\n", body)
    assert status == 413, answer
    assert json.loads(answer)["error"]["code"] == "payload_too_large"

    # Claims a small body, sends a large one: at most the claimed bytes are read.
    status, answer = _raw_request(live, head + "Content-Length: 20\r\n\r\n", body)
    assert 400 <= status < 500, answer

    status, answer = _raw_request(live, head + "Transfer-Encoding: chunked\r\n\r\n", _chunked(body))
    assert status == 413, answer
    assert json.loads(answer)["error"]["code"] == "payload_too_large"

    listed = httpx.get(f"{live.base_url}{CONTACTS}", headers={"x-api-key": key}).json()
    assert listed["total"] == 0


# --- shape ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nested",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        '{"email": "x@example.com", "custom_field_values": '
        + '{"a":' * 50_000
        + "1"
        + "}" * 50_001,
    ],
)
async def test_deeply_nested_json_is_400(
    client: Any, pool: Any, tenant: Tenant, nested: str
) -> None:
    response = await client.post(
        CONTACTS, data=nested, headers={**tenant.headers, "Content-Type": "application/json"}
    )
    await error_code(response, 400, 422)
    assert await contact_count(pool, tenant) == 0


@pytest.mark.parametrize(
    "path,body",
    [
        (
            f"{BASE}/campaigns",
            {"name": "x", "campaign_type": "email", "contact_ids": [str(uuid.uuid4())] * 20_000},
        ),
        (f"{BASE}/smart-lists", {"name": "x", "tags": ["t"] * 100_000}),
        (f"{BASE}/number-pools", {"name": "x", "phone_number_ids": [str(uuid.uuid4())] * 20_000}),
        (
            CONTACTS,
            {"email": "a@example.com", "custom_field_values": {f"k{i}": i for i in range(50_000)}},
        ),
        (CONTACTS, [{"email": "a@example.com"}] * 50_000),
    ],
)
async def test_huge_arrays_are_4xx(
    client: Any, pool: Any, tenant: Tenant, path: str, body: Any
) -> None:
    before = await snapshot(pool, tenant)
    await error_code(await client.post(path, json=body, headers=tenant.headers), 400, 413)
    assert await snapshot(pool, tenant) == before


async def test_huge_tag_list_on_a_contact_is_4xx(client: Any, pool: Any, tenant: Tenant) -> None:
    contact_id = await _create(client, tenant)
    before = await snapshot(pool, tenant)
    response = await client.post(
        f"{CONTACTS}/{contact_id}/tags",
        json={"tags": [f"t{i}" for i in range(50_000)]},
        headers=tenant.headers,
    )
    await error_code(response, 400, 413, 422)
    assert await snapshot(pool, tenant) == before


@pytest.mark.parametrize(
    "content_type,data",
    [
        ("text/plain", None),
        ("application/x-www-form-urlencoded", "email=a%40example.com"),
        (
            "multipart/form-data; boundary=xx",
            '--xx\r\nContent-Disposition: form-data; name="email"\r\n\r\n'
            "a@example.com\r\n--xx--\r\n",
        ),
        ("application/xml", "<email>a@example.com</email>"),
        (None, None),
    ],
)
@pytest.mark.parametrize(
    "path", [CONTACTS, f"{BASE}/companies", f"{BASE}/smart-lists", f"{BASE}/webhook-subscriptions"]
)
async def test_wrong_content_type_on_a_json_post_is_4xx(
    client: Any, pool: Any, tenant: Tenant, content_type: str | None, data: str | None, path: str
) -> None:
    body = (
        data
        if data is not None
        else json.dumps(
            {
                "email": email(),
                "name": "x",
                "tags": ["t"],
                "url": "https://example.com/h",
                "events": ["contact.updated"],
            }
        )
    )
    headers = dict(tenant.headers)
    if content_type:
        headers["Content-Type"] = content_type
    before = await snapshot(pool, tenant)
    await error_code(await client.post(path, data=body, headers=headers), 400, 415)
    assert await snapshot(pool, tenant) == before


async def test_deeply_nested_json_on_a_functions_route_is_400_in_its_envelope(
    client: Any, tenant: Tenant
) -> None:
    response = await client.post(
        "/functions/v1/crm-api/create-agent",
        data="[" * 100_000 + "]" * 100_000,
        headers={**tenant.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"] == "invalid_json"


async def test_wrong_content_type_on_functions_route_is_4xx_in_its_envelope(
    client: Any, tenant: Tenant
) -> None:
    response = await client.post(
        "/functions/v1/crm-api/create-agent",
        data="name=x",
        headers={**tenant.headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code in (400, 415)
    body = await response.get_json()
    assert body["success"] is False and body["error"]["code"]


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe{",
        b'{"email": "a@example.com"',
        b"",
        b"null",
        b"[]",
        b'"text"',
        b"1e999999",
        b'{"email": NaN}',
    ],
)
async def test_malformed_json_is_400(client: Any, pool: Any, tenant: Tenant, raw: bytes) -> None:
    response = await client.post(
        CONTACTS, data=raw, headers={**tenant.headers, "Content-Type": "application/json"}
    )
    await error_code(response, 400)
    assert await contact_count(pool, tenant) == 0


# --- text -------------------------------------------------------------------------------------


async def _create(client: Any, tenant: Tenant, **fields: Any) -> str:
    response = await client.post(
        CONTACTS, json={"email": email(), **fields}, headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["contact_id"])


async def _contact(client: Any, tenant: Tenant, contact_id: str) -> dict[str, Any]:
    response = await client.get(f"{CONTACTS}/{contact_id}", headers=tenant.headers)
    assert response.status_code == 200
    return (await response.get_json())["contact"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("raw", ['"a\\u0000b"', '"\\ud800"', '"\\udfff x"', '"x\\ud83d"'])
async def test_nul_and_lone_surrogates_are_400(
    client: Any, pool: Any, tenant: Tenant, raw: str
) -> None:
    contact_id = await _create(client, tenant)
    before = await snapshot(pool, tenant)
    for path, template in (
        (CONTACTS, '{"email": "%s", "first_name": %s}'),
        (f"{CONTACTS}/{contact_id}/notes", '{"content": %s}'),
        (f"{BASE}/companies", '{"name": %s}'),
    ):
        values = (email(), raw) if template.count("%s") == 2 else (raw,)
        response = await client.post(
            path,
            data=template % values,
            headers={**tenant.headers, "Content-Type": "application/json"},
        )
        assert await error_code(response, 400) == "validation_error"
    response = await client.patch(
        f"{CONTACTS}/{contact_id}",
        data='{"last_name": ' + raw + "}",
        headers={**tenant.headers, "Content-Type": "application/json"},
    )
    await error_code(response, 400)
    assert await snapshot(pool, tenant) == before


async def test_nul_in_the_path_or_query_is_400(client: Any, tenant: Tenant) -> None:
    await error_code(await client.get(f"{CONTACTS}/a%00b", headers=tenant.headers), 400, 404)
    await error_code(await client.get(f"{CONTACTS}?search=a%00b", headers=tenant.headers), 400)


async def test_overlong_name_is_400_and_nothing_is_stored(
    client: Any, pool: Any, tenant: Tenant
) -> None:
    for field in ("first_name", "last_name", "name", "address", "source"):
        response = await client.post(
            CONTACTS, json={"email": email(), field: "x" * 900_000}, headers=tenant.headers
        )
        await error_code(response, 400, 413)
    response = await client.post(
        f"{BASE}/companies", json={"name": "x" * 900_000}, headers=tenant.headers
    )
    await error_code(response, 400, 413)
    assert await contact_count(pool, tenant) == 0


@pytest.mark.parametrize("text", UNICODE)
async def test_unicode_edge_cases_are_stored_and_returned_exactly(
    client: Any, tenant: Tenant, text: str
) -> None:
    contact_id = await _create(client, tenant, first_name=text, last_name=text, address=text)
    contact = await _contact(client, tenant, contact_id)
    assert (contact["first_name"], contact["last_name"], contact["address"]) == (text, text, text)
    await _note_round_trip(client, tenant, contact_id, text)


async def _note_round_trip(client: Any, tenant: Tenant, contact_id: str, text: str) -> None:
    response = await client.post(
        f"{CONTACTS}/{contact_id}/notes", json={"content": text}, headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    listed = await (
        await client.get(f"{CONTACTS}/{contact_id}/notes", headers=tenant.headers)
    ).get_json()
    assert text in [note["content"] for note in listed["notes"]]


# --- SQL meta-characters, verbatim ------------------------------------------------------------


@pytest.mark.parametrize("text", SQL_META)
async def test_sql_meta_characters_round_trip_on_contacts_notes_and_tags(
    client: Any, tenant: Tenant, text: str
) -> None:
    contact_id = await _create(
        client, tenant, first_name=text, last_name=text, address=text, source=text
    )
    contact = await _contact(client, tenant, contact_id)
    assert [contact[key] for key in ("first_name", "last_name", "address", "lead_source")] == [
        text
    ] * 4
    response = await client.patch(
        f"{CONTACTS}/{contact_id}", json={"name": text}, headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await _contact(client, tenant, contact_id))["name"] == text
    await _note_round_trip(client, tenant, contact_id, text)

    # Tags are lowercased and trimmed (SPEC), and otherwise kept verbatim.
    tag = text.strip().lower()
    response = await client.post(
        f"{CONTACTS}/{contact_id}/tags", json={"tags": [text]}, headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert tag in (await _contact(client, tenant, contact_id))["tags"]
    tags = await (await client.get(f"{BASE}/tags", headers=tenant.headers)).get_json()
    assert tag in json.dumps(tags, ensure_ascii=False) or json.dumps(tag)[1:-1] in json.dumps(tags)
    response = await client.open(
        f"{CONTACTS}/{contact_id}/tags",
        method="DELETE",
        json={"tags": [text]},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert tag not in (await _contact(client, tenant, contact_id))["tags"]

    # Search with the same text finds the contact (LIKE wildcards are escaped, not obeyed).
    listed = await (
        await client.get(CONTACTS, query_string={"search": text}, headers=tenant.headers)
    ).get_json()
    assert contact_id in [c["id"] for c in listed["contacts"]]


@pytest.mark.parametrize("text", SQL_META)
async def test_sql_meta_characters_round_trip_on_companies_and_custom_fields(
    client: Any, tenant: Tenant, text: str
) -> None:
    response = await client.post(f"{BASE}/companies", json={"name": text}, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    company = (await response.get_json())["company"]
    assert company["name"] == text
    listed = await (await client.get(f"{BASE}/companies", headers=tenant.headers)).get_json()
    assert text in [c["name"] for c in listed["companies"]]

    key = f"f_{uuid.uuid4().hex[:8]}"
    response = await client.post(
        f"{BASE}/custom-fields",
        json={"key": key, "name": text, "field_type": "select", "options": [text, "other"]},
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    assert (await response.get_json())["custom_field"]["name"] == text
    text_key = f"t_{uuid.uuid4().hex[:8]}"
    response = await client.post(
        f"{BASE}/custom-fields",
        json={"key": text_key, "name": "Text", "field_type": "text"},
        headers=tenant.headers,
    )
    assert response.status_code == 201
    contact_id = await _create(
        client, tenant, company_id=company["id"], custom_field_values={key: text, text_key: text}
    )
    contact = await _contact(client, tenant, contact_id)
    assert contact["custom_field_values"] == {key: text, text_key: text}
    assert contact["company_id"] == company["id"]


@pytest.mark.parametrize("text", SQL_META)
async def test_sql_meta_characters_round_trip_on_invoices_and_campaigns(
    client: Any, tenant: Tenant, text: str
) -> None:
    contact_id = await _create(client, tenant)
    response = await client.post(
        f"{BASE}/invoices",
        json={
            "contact_id": contact_id,
            "due_date": "2026-12-31",
            "notes": text,
            "items": [{"item": text, "quantity": 1, "amount": 1}],
        },
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    invoice_id = (await response.get_json())["invoice"]["id"]
    response = await client.get(f"{BASE}/invoices/{invoice_id}", headers=tenant.headers)
    invoice = (await response.get_json())["invoice"]
    assert invoice["notes"] == text and invoice["items"][0]["item"] == text
    response = await client.post(
        f"{BASE}/invoices/{invoice_id}/mark-paid",
        json={"payment_method": text},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    response = await client.get(f"{BASE}/invoices/{invoice_id}", headers=tenant.headers)
    assert (await response.get_json())["invoice"]["payment_method"] == text

    response = await client.post(
        f"{BASE}/campaigns",
        json={
            "name": text,
            "campaign_type": "email",
            "subject": text,
            "message_content": text,
            "contact_ids": [contact_id],
        },
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    campaign_id = (await response.get_json())["campaign"]["id"]
    response = await client.get(f"{BASE}/campaigns/{campaign_id}", headers=tenant.headers)
    campaign = (await response.get_json())["campaign"]
    assert (campaign["name"], campaign["subject"], campaign["message_content"]) == (
        text,
        text,
        text,
    )

    response = await client.post(
        f"{BASE}/smart-lists", json={"name": text, "tags": [text]}, headers=tenant.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    smart_list = (await response.get_json())["smart_list"]
    assert smart_list["name"] == text and smart_list["tags"] == [text.strip().lower()]
