"""Issue 23 point 1: RFC 2047 header injection (CONTRACT 11, 11a).

`=?utf-8?q?Acme=0D=0AReply-To:_attacker@evil.example?=` is plain ASCII without a control
character, yet Python's email package decodes it into CR LF when it builds the header: the
invitation went out from the platform's own address with a Reply-To of the attacker's choosing, a
base64 word holding a blank line replaced the whole body, and a message subject added a Bcc.

Every header-bound field now refuses any encoded word (400 validation_error naming the field,
nothing written, charged or sent), and the email builders check each header as it will be
written, after decoding, so text from elsewhere (a CRM's location name) cannot do it either.
What reaches the SMTP server is read as raw bytes from an aiosmtpd server of this module.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.header import decode_header, make_header
from email.policy import SMTP
from typing import Any

import pytest

from api.campaigns.mime import CampaignHeaders, message_bytes
from integrations.crm import Location
from integrations.email import (
    SMTPConfig,
    UnsafeHeader,
    build_message,
    check_folded,
    check_header,
    fold_header,
    has_encoded_word,
    one_line,
)
from tenancy.db import tenant_transaction
from tenancy.embedded import free_port
from tests.conftest import Mailbox
from tests.factories import (
    ACCEPT,
    ADD_USER,
    CAMPAIGNS,
    CONTACTS,
    CREATE,
    PLANS,
    Agency,
    Tenant,
    add_contact,
    create_campaign,
    insert_contact,
    make_tenant,
    priced_tenant,
    unique_email,
    unique_phone,
)
from tests.helpers import (
    balance,
    error_of,
    schedule,
    scope_of,
    set_email_config,
    snapshot,
    soon,
    token_in,
)

# The audit's reproductions.
REPLY_TO = "=?utf-8?q?Acme=0D=0AReply-To:_attacker@evil.example?="
BCC = "=?utf-8?q?X=0D=0ABcc:_a@b.c?="
LOCATION = "=?utf-8?q?A=0D=0AReply-To:_x@y.z?="
BLANK_LINE = "=?UTF-8?B?" + base64.b64encode(b"Acme\r\n\r\nPay here: evil.example").decode() + "?="

# One q- and one b-encoded word per field; and harmless ones, refused all the same (CONTRACT 11a).
ENCODED = {
    "q": "=?utf-8?q?Acme=0D=0ABcc:_x@evil.example?=",
    "b": "=?utf-8?b?" + base64.b64encode(b"Acme\r\nBcc: x@evil.example").decode() + "?=",
}
HARMLESS = [
    "=?utf-8?q?Caf=C3=A9?=",
    "Sale =?ISO-8859-1?Q?a?= now",
    "=?utf-8?B?QWNtZQ==?=",
    "=?x?q?a b?=",
]


# --- a raw SMTP server: the bytes as they arrive ------------------------------------------------


@dataclass
class RawMailbox:
    host: str
    port: int
    received: list[tuple[list[str], bytes]] = field(default_factory=list)

    def to(self, address: str) -> list[bytes]:
        return [
            data for rcpt, data in self.received if address.lower() in [r.lower() for r in rcpt]
        ]


class _RawHandler:
    def __init__(self, box: RawMailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.box.received.append((list(envelope.rcpt_tos), bytes(envelope.original_content)))
        return "250 Message accepted for delivery"


@pytest.fixture(scope="module")
def raw_mailbox() -> Iterator[RawMailbox]:
    from aiosmtpd.controller import Controller

    box = RawMailbox("127.0.0.1", free_port())
    controller = Controller(_RawHandler(box), hostname=box.host, port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


async def use_raw_mailbox(
    pool: Any, agency: Agency, box: RawMailbox, from_address: str = "Agency <agency@example.com>"
) -> None:
    await set_email_config(pool, agency.id, box.host, box.port, from_address)


def header_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """The header lines (folded ones joined) and the body of a message as it arrived."""
    data = data.replace(b"\r\n", b"\n")
    head, separator, body = data.partition(b"\n\n")
    assert separator, data
    lines: list[bytes] = []
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t") and lines:
            lines[-1] += line
        else:
            lines.append(line)
    return lines, body


def names_of(lines: list[bytes]) -> list[str]:
    return [line.split(b":", 1)[0].decode().lower() for line in lines]


def header(lines: list[bytes], name: str) -> str:
    """One header's value as a reader decodes it."""
    (line,) = [line for line in lines if line.lower().startswith(name.lower().encode() + b":")]
    return str(make_header(decode_header(line.split(b":", 1)[1].decode("ascii").strip())))


def assert_one_header_each(data: bytes) -> list[bytes]:
    lines, _ = header_lines(data)
    names = names_of(lines)
    assert "reply-to" not in names and "bcc" not in names, lines
    assert len(names) == len(set(names)), lines
    for line in lines:
        assert re.fullmatch(rb"[A-Za-z0-9-]+:[ \t]?[\x20-\x7e\t]*", line), line
        decoded = header(lines, line.split(b":", 1)[0].decode())
        assert "\r" not in decoded and "\n" not in decoded, decoded
    return lines


# --- 400 for every header-bound field, nothing written, charged or sent -------------------------


async def _sub_account_counts(pool: Any, agency: Agency, owner: str) -> tuple[int, int]:
    return (
        await pool.fetchval(
            "SELECT count(*) FROM control.sub_accounts WHERE organisation_id = $1", agency.id
        ),
        await pool.fetchval("SELECT count(*) FROM control.invitations WHERE email = $1", owner),
    )


def _names_field(error: dict[str, Any], name: str) -> bool:
    return any(
        str(detail.get("field")).split(".")[-1] == name for detail in error.get("details", [])
    )


@pytest.mark.parametrize("encoding", sorted(ENCODED))
@pytest.mark.parametrize("name", ["name", "locationID"])
async def test_sub_account_name_or_location_with_an_encoded_word_is_400(
    client: Any, pool: Any, agency: Agency, mailbox: Mailbox, name: str, encoding: str
) -> None:
    owner = unique_email("owner")
    body = {"email": owner, "name": "Acme", name: ENCODED[encoding]}
    response = await client.post(
        CREATE, json=body, headers={**agency.headers, "Idempotency-Key": uuid.uuid4().hex}
    )
    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, name), error
    assert await _sub_account_counts(pool, agency, owner) == (0, 0)
    assert mailbox.to(owner) == []


@pytest.mark.parametrize("encoding", sorted(ENCODED))
@pytest.mark.parametrize("name", ["first_name", "last_name"])
async def test_invited_user_names_with_an_encoded_word_are_400(
    client: Any, pool: Any, tenant: Tenant, mailbox: Mailbox, name: str, encoding: str
) -> None:
    invitee = unique_email("user")
    response = await client.post(
        ADD_USER,
        headers=tenant.organisation.headers,
        json={
            "email": invitee,
            "role": "sub_account_user",
            "sub_account_id": str(tenant.id),
            name: ENCODED[encoding],
        },
    )
    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, name), error
    assert (
        await pool.fetchval("SELECT count(*) FROM control.invitations WHERE email = $1", invitee)
        == 0
    )
    assert mailbox.to(invitee) == []


@pytest.mark.parametrize("encoding", sorted(ENCODED))
@pytest.mark.parametrize("name", ["first_name", "last_name"])
async def test_accepting_with_names_holding_an_encoded_word_is_400_and_accepts_nothing(
    client: Any, pool: Any, tenant: Tenant, mailbox: Mailbox, name: str, encoding: str
) -> None:
    invitee = unique_email("user")
    response = await client.post(
        ADD_USER,
        headers=tenant.organisation.headers,
        json={"email": invitee, "role": "sub_account_user", "sub_account_id": str(tenant.id)},
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    token = token_in(mailbox.to(invitee)[-1])

    response = await client.post(ACCEPT, json={"token": token, name: ENCODED[encoding]})
    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, name), error
    assert (
        await pool.fetchval("SELECT accepted_at FROM control.invitations WHERE email = $1", invitee)
        is None
    )
    assert await pool.fetchval("SELECT count(*) FROM control.users WHERE email = $1", invitee) == 0
    # The token is still good: a clean accept works.
    response = await client.post(ACCEPT, json={"token": token, name: "Ada"})
    assert response.status_code == 200, await response.get_data(as_text=True)


@pytest.mark.parametrize("encoding", sorted(ENCODED))
async def test_plan_name_with_an_encoded_word_is_400(
    client: Any, pool: Any, agency: Agency, encoding: str
) -> None:
    slug = f"plan-{uuid.uuid4().hex[:8]}"
    response = await client.post(
        PLANS, headers=agency.headers, json={"slug": slug, "name": ENCODED[encoding]}
    )
    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, "name"), error
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM control.plans WHERE organisation_id = $1", agency.id
        )
        == 0
    )


# BCC is the audit's reproduction through a campaign subject.
@pytest.mark.parametrize("subject", [*ENCODED.values(), BCC, *HARMLESS])
async def test_campaign_subject_with_an_encoded_word_is_400_and_stores_nothing(
    client: Any, pool: Any, tenant: Tenant, subject: str
) -> None:
    before = await snapshot(pool, tenant)
    response = await client.post(
        CAMPAIGNS,
        headers=tenant.headers,
        json={
            "name": "Sale",
            "campaign_type": "email",
            "subject": subject,
            "message_content": "<p>hi</p>",
        },
    )
    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, "subject"), error
    assert await snapshot(pool, tenant) == before


@pytest.mark.parametrize("subject", [*ENCODED.values(), BCC, HARMLESS[0]])
async def test_message_subject_with_an_encoded_word_is_400_no_row_no_charge_no_email(
    client: Any, pool: Any, agency: Agency, mailbox: Mailbox, subject: str
) -> None:
    tenant = await priced_tenant(client, agency, credit=10, email_per_message=0.5)
    address = unique_email("to")
    contact_id = await insert_contact(pool, tenant, address, phone=unique_phone())
    before = await snapshot(pool, tenant)

    response = await client.post(
        f"{CONTACTS}/{contact_id}/messages",
        headers=tenant.headers,
        json={"message_type": "email", "content": "hi", "subject": subject},
    )

    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, "subject"), error
    assert await snapshot(pool, tenant) == before
    assert await balance(pool, tenant) == 10
    assert mailbox.to(address) == []


@pytest.mark.parametrize("text", HARMLESS)
async def test_harmless_encoded_words_in_names_are_refused_too(
    client: Any, pool: Any, agency: Agency, text: str
) -> None:
    owner = unique_email("owner")
    response = await client.post(
        CREATE, headers=agency.headers, json={"email": owner, "name": text}
    )
    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, "name"), error
    assert await _sub_account_counts(pool, agency, owner) == (0, 0)


async def test_text_that_only_looks_alike_is_accepted(client: Any, agency: Agency) -> None:
    # "=?" without a "?=" after it, "?=" before "=?", and equals and question marks apart.
    for name in ["Who =? us", "Q?= A=?", "a = b? c", "Café ☕ & Co"]:
        response = await client.post(
            CREATE, headers=agency.headers, json={"email": unique_email("owner"), "name": name}
        )
        assert response.status_code == 201, await response.get_data(as_text=True)


# --- the audit's reproductions, exactly ---------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("name", REPLY_TO, id="reply-to-through-the-sub-account-name"),
        pytest.param("locationID", LOCATION, id="reply-to-through-the-location-id"),
        pytest.param("name", BLANK_LINE, id="base64-word-with-a-blank-line-through-the-name"),
    ],
)
async def test_reproduction_through_the_sub_account_webhook(
    client: Any, pool: Any, agency: Agency, mailbox: Mailbox, field: str, value: str
) -> None:
    before = len(mailbox.to("victim@x.com"))
    response = await client.post(
        CREATE, headers=agency.headers, json={"email": "victim@x.com", field: value}
    )
    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, field), error
    assert await _sub_account_counts(pool, agency, "victim@x.com") == (0, 0)
    assert len(mailbox.to("victim@x.com")) == before


async def test_reproduction_bcc_through_a_message_subject(
    client: Any, pool: Any, agency: Agency, raw_mailbox: RawMailbox
) -> None:
    tenant = await priced_tenant(client, agency, credit=10, email_per_message=0.5)
    await use_raw_mailbox(pool, agency, raw_mailbox)
    address = unique_email("to")
    contact_id = await insert_contact(pool, tenant, address, phone=unique_phone())
    before = await snapshot(pool, tenant)

    response = await client.post(
        f"{CONTACTS}/{contact_id}/messages",
        headers=tenant.headers,
        json={"message_type": "email", "content": "hi", "subject": BCC},
    )

    error = await error_of(response, 400)
    assert error["code"] == "validation_error" and _names_field(error, "subject"), error
    assert await snapshot(pool, tenant) == before
    assert await balance(pool, tenant) == 10
    assert raw_mailbox.to(address) == [] and raw_mailbox.to("a@b.c") == []


# --- what reaches the SMTP server ---------------------------------------------------------------


async def test_a_non_ascii_message_subject_arrives_intact_in_one_header(
    client: Any, pool: Any, agency: Agency, raw_mailbox: RawMailbox
) -> None:
    tenant = await priced_tenant(client, agency, credit=10, email_per_message=0.5)
    await use_raw_mailbox(pool, agency, raw_mailbox, "Agence Café ☕ <agency@example.com>")
    address = unique_email("to")
    contact_id = await insert_contact(pool, tenant, address, phone=unique_phone())

    response = await client.post(
        f"{CONTACTS}/{contact_id}/messages",
        headers=tenant.headers,
        json={
            "message_type": "email",
            "content": "Grüße, the body",
            "subject": "Café ☕ Reply-To: not a header",
        },
    )

    assert response.status_code == 201, await response.get_data(as_text=True)
    (data,) = raw_mailbox.to(address)
    lines = assert_one_header_each(data)
    assert header(lines, "Subject") == "Café ☕ Reply-To: not a header"
    assert header(lines, "From") == "Agence Café ☕ <agency@example.com>"
    # Encoded by the library: the Subject line itself is ASCII and holds encoded words.
    subject_line = next(line for line in lines if line.lower().startswith(b"subject:"))
    assert b"=?utf-8?" in subject_line.lower()
    parsed = message_from_bytes(data, policy=SMTP)
    assert parsed.get_content().strip() == "Grüße, the body"  # type: ignore[attr-defined]


async def test_a_non_ascii_campaign_subject_arrives_intact_in_one_header(
    client: Any, pool: Any, agency: Agency, raw_mailbox: RawMailbox, migrated: str
) -> None:
    from api.campaigns.delivery import run_campaign

    tenant = await make_tenant(client, agency)
    await use_raw_mailbox(pool, agency, raw_mailbox, "Agence Café ☕ <agency@example.com>")
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(
        client, tenant, contact_ids=[contact], subject="Café ☕", message_content="<p>Grüße</p>"
    )
    response = await schedule(client, tenant, campaign["id"], soon(3600))
    assert response.status_code == 200, await response.get_data(as_text=True)
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET start_date = now() - interval '1 second' WHERE id = $1",
            uuid.UUID(campaign["id"]),
        )
        address = await conn.fetchval(
            "SELECT email FROM contacts WHERE id = $1", uuid.UUID(contact)
        )

    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))

    (data,) = raw_mailbox.to(address)
    lines = assert_one_header_each(data)
    assert header(lines, "Subject") == "Café ☕"
    assert header(lines, "From") == "Agence Café ☕ <agency@example.com>"
    parsed = message_from_bytes(data, policy=SMTP)
    html = parsed.get_body(("html",)).get_content()  # type: ignore[attr-defined]
    assert "Grüße" in html


async def test_a_crm_location_name_with_an_encoded_word_injects_no_header(
    client: Any, pool: Any, agency: Agency, raw_mailbox: RawMailbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The locationID is clean; the name the CRM answers with is not (the sandbox CRM names a
    # location `Sandbox Location <id>`, so an id like LOCATION would do the same were it let in).
    class HostileCRM:
        async def fetch_location(self, location_id: str) -> Location:
            return Location(location_id, f"Sandbox Location {LOCATION} {BLANK_LINE}", "UTC")

        async def connect_location(self, location_id: str, sub_account_id: str) -> None:
            return None

    monkeypatch.setattr("tenancy.provisioning.crm_provider", lambda name: HostileCRM())
    await use_raw_mailbox(pool, agency, raw_mailbox)
    owner = unique_email("owner")
    response = await client.post(
        CREATE, headers=agency.headers, json={"email": owner, "locationID": "loc-123"}
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    assert (await response.get_json())["invitation_email_sent"] is True

    (data,) = raw_mailbox.to(owner)
    lines = assert_one_header_each(data)
    subject = header(lines, "Subject")
    assert subject.startswith("You are invited to Sandbox Location ")
    assert not has_encoded_word(subject) and "Reply-To" not in names_of(lines)
    _, body = header_lines(data)
    assert b"Invitation token:" in body  # the body is the invitation, not the attacker's text
    assert raw_mailbox.to("x@y.z") == []


async def test_a_non_ascii_sub_account_name_reaches_the_invitation_subject_intact(
    client: Any, pool: Any, agency: Agency, raw_mailbox: RawMailbox
) -> None:
    await use_raw_mailbox(pool, agency, raw_mailbox)
    owner = unique_email("owner")
    response = await client.post(
        CREATE, headers=agency.headers, json={"email": owner, "name": "Café ☕ Ltd"}
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    (data,) = raw_mailbox.to(owner)
    lines = assert_one_header_each(data)
    assert header(lines, "Subject") == "You are invited to Café ☕ Ltd"


# --- the builders themselves --------------------------------------------------------------------

CONFIG = SMTPConfig("127.0.0.1", 25, "Shop <shop@example.com>")
DECODES_TO_A_LINE_BREAK = [
    REPLY_TO,
    BCC,
    LOCATION,
    BLANK_LINE,
    *ENCODED.values(),
    "=?utf-8?q?A B=0D=0AX-Evil:_1?=",  # a space inside: Python decodes it
    "=?utf-8?Q?A=0AX-Evil:_1?=",
    "=?utf-8?q?A=00?=",
    "Hi =?utf-8?q?=E2=80=A8?= there",  # U+2028
    # an encoded word inside an encoded word: the next reader decodes it
    "=?utf-8?q?=3D=3Futf-8=3Fq=3FX=3D0D=3D0ABcc:_a=40b.c=3F=3D?=",
]


@pytest.mark.parametrize("text", DECODES_TO_A_LINE_BREAK)
def test_the_builders_refuse_a_header_that_decodes_to_a_line_break(text: str) -> None:
    with pytest.raises(UnsafeHeader):
        build_message(CONFIG, "to@example.com", text, "body")
    with pytest.raises(UnsafeHeader):
        build_message(CONFIG, "to@example.com", "Hello", "body", headers={"X-Note": text})
    with pytest.raises(UnsafeHeader):
        build_message(
            SMTPConfig("127.0.0.1", 25, f"{text} <shop@example.com>"),
            "to@example.com",
            "Hello",
            "body",
        )
    with pytest.raises(UnsafeHeader):
        CampaignHeaders.of("Shop <shop@example.com>", text, uuid.uuid4())
    with pytest.raises(UnsafeHeader):
        CampaignHeaders.of(f"{text} <shop@example.com>", "Hello", uuid.uuid4())


def test_the_builders_refuse_an_address_whose_local_part_decodes_to_a_line_break() -> None:
    # "=" and "?" are atext: this is a syntactically valid address.
    address = "=?utf-8?q?a=0d=0abcc=3a_x=40evil.example?=@example.com"
    with pytest.raises(UnsafeHeader):
        build_message(CONFIG, address, "Hello", "body")
    headers = CampaignHeaders.of("Shop <shop@example.com>", "Hello", uuid.uuid4())
    with pytest.raises(UnsafeHeader):
        message_bytes(headers, address, "<id@x>", "text", "<p>html</p>", "http://127.0.0.1/u")


def test_an_undecodable_encoded_word_is_refused_by_the_builder() -> None:
    with pytest.raises(UnsafeHeader):
        check_header("Subject", "=?no-such-charset?q?abc?=")


@pytest.mark.parametrize(
    "folded",
    [
        b"Subject: x",
        b"Subject: x\r\nBcc: y\r\n",
        b"Subject: x\r\n\r\n",
        b"Subject: x\r\n \r\n",
        b"Subject: x\ny\r\n",
        b"Subject: x\ry\r\n",
        b"To: x\r\n",
    ],
)
def test_a_folded_header_that_is_not_exactly_one_header_is_refused(folded: bytes) -> None:
    with pytest.raises(UnsafeHeader):
        check_folded("Subject", folded)


def test_ordinary_text_is_encoded_by_the_library() -> None:
    for value, expected in [
        ("Café ☕", "Café ☕"),
        ("Spring sale", "Spring sale"),
        ("x" * 300, "x" * 300),
        ("Grüße und " * 40, "Grüße und " * 40),
        ("=?utf-8?q?Caf=C3=A9?=", "Café"),
    ]:
        folded = fold_header("Subject", value)
        assert check_folded("Subject", folded) == folded
        folded.decode("ascii")  # non-ASCII text is encoded
        parsed = message_from_bytes(folded + b"\r\nbody", policy=SMTP)
        assert str(parsed["Subject"]) == expected
    message = build_message(
        SMTPConfig("127.0.0.1", 25, "Café ☕ <a@example.com>"), "to@example.com", "Café ☕", "body"
    )
    data = message.as_bytes(policy=SMTP)
    assert b"Subject: =?utf-8?b?Q2Fmw6kg4piV?=\r\n" in data
    assert (
        str(make_header(decode_header(message_from_bytes(data)["From"])))
        == "Café ☕ <a@example.com>"
    )


def test_one_line_leaves_no_encoded_word_and_no_line_break() -> None:
    for text in [LOCATION, BLANK_LINE, f"Sandbox Location {REPLY_TO}", "==??==", "a\r\nb"]:
        line = one_line(text)
        assert not has_encoded_word(line) and "\r" not in line and "\n" not in line
        check_header("Subject", line)
    assert one_line("Café ☕ Ltd") == "Café ☕ Ltd"
