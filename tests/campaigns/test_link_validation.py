"""Campaign links (CONTRACT 11, 11a; issue 23 point 6, issue 24 point 4): an href that is not a
valid URL (bad port, bad IPv6 literal, a DNS label over 63 characters) or that holds whitespace or
a control character, raw or as an HTML character reference, is refused with 400
validation_error naming message_content and nothing is written; a click on a tracked link that
cannot be followed answers 404 and counts nothing, never 500."""

from __future__ import annotations

import uuid

import pytest

from api.campaigns.content import MAX_LINK_BYTES, check_links, render
from api.campaigns.delivery import run_campaign
from api.tracking.tokens import sign
from tenancy.db import tenant_transaction
from tests.factories import CAMPAIGNS, add_contact, create_campaign
from tests.helpers import (
    contact_email,
    error_of,
    get_campaign,
    schedule,
    scope_of,
    snapshot,
    soon,
    tracking_links,
)

LABEL_64 = "a" * 64

NOT_URLS = [
    "https://[",
    "https://[/x",
    "http://a:99999999/",
    "http://example.com:65536/",
    "http://example.com:0/",
    "http://example.com:8o/",
    "http://example.com:+80/",
    "http://example.com:80:80/",
    "http://example.com:" + "9" * 5000 + "/",
    "https://[::1/",
    "https://[:::1]/",
    "https://[gg::1]/",
    "https://[1.2.3.4]/",
    "https://[v1.x]/",
    "https://[::1]x/",
    f"https://{LABEL_64}.example.com/",
    f"https://www.{LABEL_64}/",
    "https://a..example.com/",
    "https://" + ("a" * 63 + ".") * 4 + "com/",
    "http://999.1.1.1/",
    "https://exa&lt;mple.com/",
    "https://",
    "https:///path",
    "https:example.com/no-slashes",
]
WHITESPACE_OR_CONTROL = [
    "https://example.com/a\r\nSet-Cookie: x=1",
    "https://example.com/a&#13;&#10;Set-Cookie: x=1",
    "https://example.com/a&#x0d;&#x0a;Set-Cookie:x=1",
    "https://example.com/a&#X0D;",
    "https://example.com/a&#13",
    "https://example.com/a&#0010;b",
    "https://example.com/a&#x00000000d;b",
    "https://example.com/a&#" + "1" * 6000 + ";b",
    "https://example.com/a&NewLine;b",
    "https://example.com/a&Tab;b",
    "https://example.com/a b",
    "https://example.com/a&#32;b",
    "https://example.com/a&nbsp;b",
    "https://example.com/a\u00a0b",
    "https://example.com/a\u2028b",
    "https://example.com/a&#x2029;b",
    "https://example.com/a\tb",
    "https://example.com/a\x00b",
    "https://example.com/a&#x7f;b",
    "https://example.com/a&#x85;b",
    " https://example.com/",
    "https://example.com/ ",
    "\nhttps://example.com/",
    "https://exa mple.com/",
]
VALID = [
    "https://example.com/offer?a=1&amp;b=2",
    "HTTPS://EXAMPLE.COM/Path",
    "http://example.com:8080/x",
    "http://example.com:65535/x",
    "https://example.com:/x",
    "https://[2001:db8::1]:8443/x",
    "https://[::ffff:192.0.2.1]/x",
    "http://192.0.2.1/",
    "https://ex\u00e4mple.com/\u00fc?q=%20",
    "https://user:pw@example.com/x#frag",
    "https://example.com./x",
    f"https://{'a' * 63}.example.com/",
    "https://example.com/%0d%0a",
]


def short(value: str) -> str:
    return value if len(value) <= 60 else f"{value[:40]}...({len(value)} characters)"


def campaign_body(href: str, *, quote: str = '"') -> dict[str, str]:
    return {
        "name": "Sale",
        "campaign_type": "email",
        "subject": "Sale",
        "message_content": f"<p>Hi</p><a href={quote}{href}{quote}>shop</a>",
    }


async def refused(client, pool, tenant, body) -> None:
    before = await snapshot(pool, tenant)
    response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
    error = await error_of(response, 400)
    assert error["code"] == "validation_error"
    assert [detail["field"] for detail in error["details"]] == ["message_content"]
    assert await snapshot(pool, tenant) == before


@pytest.mark.parametrize("href", NOT_URLS, ids=short)
async def test_campaign_link_that_is_not_a_valid_url_is_400(client, pool, tenant, href):
    await refused(client, pool, tenant, campaign_body(href))


@pytest.mark.parametrize("href", WHITESPACE_OR_CONTROL, ids=short)
async def test_campaign_link_holding_whitespace_or_a_control_character_is_400(
    client, pool, tenant, href
):
    await refused(client, pool, tenant, campaign_body(href))


@pytest.mark.parametrize("quote", ["'", ""])
@pytest.mark.parametrize(
    "href",
    [
        "https://example.com/a&#13;&#10;Set-Cookie:x=1",
        "http://a:99999999/",
        f"https://{LABEL_64}.com/",
    ],
)
async def test_single_quoted_and_unquoted_links_are_checked_too(client, pool, tenant, href, quote):
    await refused(client, pool, tenant, campaign_body(href, quote=quote))


async def test_sms_campaign_content_is_checked_as_well(client, pool, tenant):
    body = {
        "name": "Text",
        "campaign_type": "sms",
        "message_content": 'Shop <a href="https://example.com/a&#13;&#10;X: 1">now</a>',
    }
    await refused(client, pool, tenant, body)


async def test_a_link_too_long_to_track_is_400(client, pool, tenant):
    href = "https://example.com/" + "a" * (MAX_LINK_BYTES - len("https://example.com/") + 1)
    await refused(client, pool, tenant, campaign_body(href))


async def test_the_longest_link_accepted_is_tracked_and_followed(client, tenant):
    href = "https://example.com/" + "a" * (MAX_LINK_BYTES - len("https://example.com/"))
    campaign = await create_campaign(client, tenant, message_content=f'<a href="{href}">long</a>')
    assert href in campaign["message_content"]
    token = sign("click", tenant.id, uuid.uuid4(), href)
    response = await client.get(f"/track/click/{token}")
    assert response.status_code == 302
    assert response.headers["Location"] == href


@pytest.mark.parametrize("href", VALID)
async def test_valid_links_are_accepted_and_stored_as_sent(client, pool, tenant, href):
    body = campaign_body(href)
    response = await client.post(CAMPAIGNS, json=body, headers=tenant.headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    campaign = (await response.get_json())["campaign"]
    assert campaign["message_content"] == body["message_content"]


async def test_links_of_other_schemes_and_relative_links_are_left_alone(client, tenant):
    content = (
        '<a href="mailto:sales@example.com">mail</a> <a href="#top">top</a> '
        '<a href="/relative path">rel</a> <a href="tel:+14155550100">call</a>'
    )
    campaign = await create_campaign(client, tenant, message_content=content)
    assert campaign["message_content"] == content


def test_every_web_link_is_tracked_whatever_its_quoting():
    content = (
        "<a href=\"https://example.com/1\">1</a><a href='https://example.com/2'>2</a>"
        '<a href=https://example.com/3>3</a><a HREF = "https://example.com/4?a=1&amp;b=2">'
        '4</a><a href="mailto:x@example.com">m</a>'
    )
    assert check_links(content) == content
    rendered = render(content, uuid.uuid4(), uuid.uuid4()).html
    assert "example.com/" not in rendered
    assert rendered.count("/track/click/") == 4
    assert 'href="mailto:x@example.com"' in rendered


# --- clicks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://[",
        "http://a:99999999/",
        "http://a:" + "9" * 5000 + "/",
        "https://[::1/",
        "https://[gg::1]/",
        f"https://{LABEL_64}.example.com/",
        "https://a..b/",
        "https://example.com/\r\nX: 1",
        "ftp://example.com/",
        "https:example.com",
    ],
    ids=short,
)
async def test_click_on_a_link_that_cannot_be_followed_is_404_and_counts_nothing(
    client, pool, tenant, url
):
    token = sign("click", tenant.id, uuid.uuid4(), url)
    before = await snapshot(pool, tenant)
    response = await client.get(f"/track/click/{token}")
    assert (await error_of(response, 404))["code"] == "not_found"
    assert await snapshot(pool, tenant) == before


async def test_click_on_a_bad_link_of_a_campaign_sent_before_the_check_is_404(
    client, pool, migrated, tenant, mailbox
):
    # A campaign stored before links were checked: its content is written directly.
    contact = await add_contact(client, tenant)
    campaign = await create_campaign(client, tenant, contact_ids=[contact])
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET message_content = $2 WHERE id = $1",
            uuid.UUID(campaign["id"]),
            '<a href="http://shop.example:99999999/sale">sale</a>',
        )
    assert (await schedule(client, tenant, campaign["id"], soon(3600))).status_code == 200
    async with tenant_transaction(pool, tenant.schema) as conn:
        await conn.execute(
            "UPDATE campaigns SET start_date = now() - interval '1 second' WHERE id = $1",
            uuid.UUID(campaign["id"]),
        )
    await run_campaign(scope_of(pool, tenant), migrated, uuid.UUID(campaign["id"]))
    (message,) = mailbox.to(await contact_email(pool, tenant, contact))
    response = await client.get(tracking_links(message)["click"])
    assert (await error_of(response, 404))["code"] == "not_found"
    assert (await get_campaign(client, tenant, campaign["id"]))["clicked_count"] == 0
