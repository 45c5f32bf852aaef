"""GET /contacts search (CONTRACT 7, 9): q, email, phone and repeatable tag, combined with AND;
`total` counts the filtered set; the spec's own limit/offset rule is unchanged."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.factories import CONTACTS, create_contact
from tests.helpers import expect_error


async def search(client, tenant, *pairs):
    response = await client.get(f"{CONTACTS}?{urlencode(pairs)}", headers=tenant.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def found(client, tenant, *pairs):
    body = await search(client, tenant, *pairs)
    assert body["total"] == len(body["contacts"])
    return [contact["id"] for contact in body["contacts"]]


async def tag(client, tenant, contact_id, *tags):
    response = await client.post(
        f"{CONTACTS}/{contact_id}/tags", json={"tags": list(tags)}, headers=tenant.headers
    )
    assert response.status_code == 200


@pytest.fixture
async def people(client, tenant):
    """Ada (vip, lead), Grace (vip) and Alan (lead), made in that order."""
    ada = await create_contact(
        client,
        tenant,
        first_name="Ada",
        last_name="Lovelace",
        email="ada@analytical.example",
        phone="+14155550101",
    )
    grace = await create_contact(
        client,
        tenant,
        first_name="Grace",
        last_name="Hopper",
        email="grace@navy.example",
        phone="+442071838750",
    )
    alan = await create_contact(
        client, tenant, first_name="Alan", last_name="Turing", email="alan_t@bletchley.example"
    )
    await tag(client, tenant, ada, "vip", "lead")
    await tag(client, tenant, grace, "vip")
    await tag(client, tenant, alan, "lead")
    return {"ada": ada, "grace": grace, "alan": alan}


async def test_q_matches_within_the_name_in_any_case(client, tenant, people):
    assert await found(client, tenant, ("q", "LOVE")) == [people["ada"]]
    assert await found(client, tenant, ("q", "ra")) == [people["grace"]]


async def test_q_matches_within_the_email(client, tenant, people):
    assert await found(client, tenant, ("q", "navy.EX")) == [people["grace"]]
    assert await found(client, tenant, ("q", ".example")) == [
        people["alan"],
        people["grace"],
        people["ada"],
    ]


async def test_q_matches_within_the_phones_digits_however_written(client, tenant, people):
    assert await found(client, tenant, ("q", "(415) 555-01")) == [people["ada"]]
    assert await found(client, tenant, ("q", "2071")) == [people["grace"]]
    assert await found(client, tenant, ("q", "+44 20")) == [people["grace"]]
    assert await found(client, tenant, ("q", "555")) == [people["ada"]]


async def test_q_of_two_characters_matches_as_any_other(client, tenant, people):
    """Two characters go through the bigram indexes (no trigram to look up): same answers."""
    assert await found(client, tenant, ("q", "RA")) == [people["grace"]]
    assert await found(client, tenant, ("q", "t@")) == [people["alan"]]
    assert await found(client, tenant, ("q", "_t")) == [people["alan"]]
    assert await found(client, tenant, ("q", "44")) == [people["grace"]]
    assert await found(client, tenant, ("q", "a ")) == [people["ada"]]
    assert await found(client, tenant, ("q", "zz")) == []
    body = await search(client, tenant, ("q", "an"), ("limit", "1"))
    assert (body["total"], [c["id"] for c in body["contacts"]]) == (2, [people["alan"]])


async def test_q_wildcards_are_plain_characters(client, tenant, people):
    assert await found(client, tenant, ("q", "%%")) == []
    assert await found(client, tenant, ("q", "n_t")) == [people["alan"]]
    assert await found(client, tenant, ("q", "__")) == []


async def test_email_is_exact_in_any_case(client, tenant, people):
    assert await found(client, tenant, ("email", "Grace@Navy.example")) == [people["grace"]]
    assert await found(client, tenant, ("email", "grace@navy.exampl")) == []


async def test_phone_is_exact_e164(client, tenant, people):
    assert await found(client, tenant, ("phone", "+442071838750")) == [people["grace"]]
    assert await found(client, tenant, ("phone", "+14155550102")) == []


async def test_tags_repeat_and_must_all_be_carried(client, tenant, people):
    assert await found(client, tenant, ("tag", "vip")) == [people["grace"], people["ada"]]
    assert await found(client, tenant, ("tag", "VIP"), ("tag", "lead")) == [people["ada"]]
    assert await found(client, tenant, ("tag", "vip"), ("tag", "nope")) == []


async def test_filters_combine_with_and_and_total_counts_the_filtered_set(client, tenant, people):
    assert await found(client, tenant, ("q", "example"), ("tag", "lead")) == [
        people["alan"],
        people["ada"],
    ]
    assert await found(
        client,
        tenant,
        ("q", "ada"),
        ("tag", "lead"),
        ("email", "ada@analytical.example"),
        ("phone", "+14155550101"),
    ) == [people["ada"]]
    assert await found(client, tenant, ("q", "grace"), ("tag", "lead")) == []
    page = await search(client, tenant, ("q", "example"), ("limit", "1"), ("offset", "1"))
    assert [c["id"] for c in page["contacts"]] == [people["grace"]]
    assert (page["total"], page["limit"], page["offset"], page["has_more"]) == (3, 1, 1, True)


async def test_the_lists_own_limit_rule_still_applies_to_a_search(client, tenant, people):
    body = await search(client, tenant, ("q", "example"), ("limit", "500"))
    assert body["limit"] == 100 and body["total"] == 3


async def test_another_sub_accounts_contacts_are_never_found(client, tenant, tenant_second):
    await create_contact(
        client, tenant_second, first_name="Beatrix", email="bee@b.example", phone="+14155550142"
    )
    for pair in (
        ("q", "beatrix"),
        ("email", "bee@b.example"),
        ("phone", "+14155550142"),
        ("q", "4155550142"),
    ):
        assert await found(client, tenant, pair) == []


@pytest.mark.parametrize(
    ("pairs", "field"),
    [
        ((("q", "a"),), "q"),
        ((("q", "x" * 101),), "q"),
        ((("q", ""),), "q"),
        ((("q", "ab"), ("q", "cd")), "q"),
        ((("email", "not-an-email"),), "email"),
        ((("email", "a@b"),), "email"),
        ((("phone", "4155550101"),), "phone"),
        ((("phone", "+1415555010"),), "phone"),
        ((("phone", "+1 415 555 0101"),), "phone"),
        ((("phone", " +14155550101"),), "phone"),
        ((("email", "ada@analytical.example "),), "email"),
        ((("tag", ""),), "tag"),
        ((("tag", "vip"), ("tag", "  ")), "tag"),
        ((("tag", "x" * 101),), "tag"),
    ],
)
async def test_malformed_filters_are_400_naming_the_field(client, tenant, pairs, field):
    response = await client.get(f"{CONTACTS}?{urlencode(pairs)}", headers=tenant.headers)
    body = await expect_error(response, 400, "validation_error")
    assert [detail["field"] for detail in body["error"]["details"]] == [field]


async def test_q_of_100_characters_is_accepted(client, tenant, people):
    assert await found(client, tenant, ("q", "x" * 100)) == []
