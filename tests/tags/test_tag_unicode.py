"""Look-alike tags are one tag (CONTRACT 11, 11a): a tag is normalised to Unicode NFKC, loses the
zero-width characters U+200B, U+200C, U+200D, U+2060 and U+FEFF, and is trimmed and lowercased;
adding, removing, replacing through PATCH, the GET /contacts `tag` filter and smart lists all
match that way."""

from __future__ import annotations

import unicodedata
import uuid
from urllib.parse import urlencode

import pytest

from tests.factories import BASE, CONTACTS, create_contact
from tests.helpers import error_code, get_contact, tenant_sql

SMART_LISTS = f"{BASE}/smart-lists"
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
CAFE_NFC = unicodedata.normalize("NFC", "caf\u00e9")
CAFE_NFD = unicodedata.normalize("NFD", "caf\u00e9")

# Each is the tag "vip" to a reader.
VIP_LOOK_ALIKES = [
    "\uff36\uff29\uff30",  # ＶＩＰ, fullwidth
    "\uff56\uff49\uff50",  # ｖｉｐ
    "V\u200bI\u200cP",
    "\u2060vip\ufeff",
    "v\u200di\u200bp",
    " \u200bVIP\u200b ",
    "\U0001d42f\U0001d422\U0001d429",  # mathematical bold 𝐯𝐢𝐩
]


async def add(client, tenant, contact_id, tags):
    return await client.post(
        f"{CONTACTS}/{contact_id}/tags", json={"tags": tags}, headers=tenant.headers
    )


async def remove(client, tenant, contact_id, tags):
    return await client.delete(
        f"{CONTACTS}/{contact_id}/tags", json={"tags": tags}, headers=tenant.headers
    )


async def stored_tags(pool, tenant, contact_id):
    [row] = await tenant_sql(
        pool, tenant, "SELECT tags FROM contacts WHERE id = $1", uuid.UUID(contact_id)
    )
    return list(row["tags"])


async def tagged(client, tenant, pool, tags):
    contact_id = await create_contact(client, tenant)
    response = await add(client, tenant, contact_id, tags)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return contact_id


@pytest.mark.parametrize("look_alike", VIP_LOOK_ALIKES)
async def test_a_look_alike_of_a_tag_is_the_same_tag(client, pool, tenant, look_alike):
    contact_id = await tagged(client, tenant, pool, ["vip"])
    before = await tenant_sql(pool, tenant, "SELECT * FROM contacts")
    response = await add(client, tenant, contact_id, [look_alike])
    assert response.status_code == 200
    body = await response.get_json()
    assert (body["tags"], body["added"]) == (["vip"], ["vip"])
    # Nothing changed: the contact already carried the tag.
    assert await tenant_sql(pool, tenant, "SELECT * FROM contacts") == before
    assert (await get_contact(client, tenant, contact_id))["tags"] == ["vip"]


async def test_look_alikes_in_one_request_are_one_tag(client, pool, tenant):
    contact_id = await tagged(client, tenant, pool, [*VIP_LOOK_ALIKES, "vip"])
    assert await stored_tags(pool, tenant, contact_id) == ["vip"]


@pytest.mark.parametrize("character", ZERO_WIDTH)
async def test_each_zero_width_character_is_removed(client, pool, tenant, character):
    contact_id = await tagged(client, tenant, pool, [f"{character}le{character}ad{character}"])
    assert await stored_tags(pool, tenant, contact_id) == ["lead"]


async def test_cafe_in_nfc_and_nfd_is_one_tag(client, pool, tenant):
    assert CAFE_NFC != CAFE_NFD
    contact_id = await tagged(client, tenant, pool, [CAFE_NFD])
    assert await stored_tags(pool, tenant, contact_id) == [CAFE_NFC]
    body = await (await add(client, tenant, contact_id, [CAFE_NFC.upper()])).get_json()
    assert body["tags"] == [CAFE_NFC]
    assert await stored_tags(pool, tenant, contact_id) == [CAFE_NFC]


@pytest.mark.parametrize("tags", [["\u200b"], ["\u200b\u200c \u2060", "\ufeff"], ["\u3000\u200d"]])
async def test_tags_that_are_only_zero_width_characters_are_tags_required(
    client, pool, tenant, tags
):
    contact_id = await create_contact(client, tenant)
    response = await add(client, tenant, contact_id, tags)
    assert await error_code(response, 400) == "tags_required"
    assert await stored_tags(pool, tenant, contact_id) == []


@pytest.mark.parametrize("look_alike", VIP_LOOK_ALIKES)
async def test_removal_matches_look_alikes(client, pool, tenant, look_alike):
    contact_id = await tagged(client, tenant, pool, ["vip", "lead"])
    response = await remove(client, tenant, contact_id, [look_alike])
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    assert (body["tags"], body["removed"]) == (["lead"], ["vip"])
    assert await stored_tags(pool, tenant, contact_id) == ["lead"]


async def test_removal_of_cafe_in_nfd_removes_the_nfc_tag(client, pool, tenant):
    contact_id = await tagged(client, tenant, pool, [CAFE_NFC])
    response = await remove(client, tenant, contact_id, [CAFE_NFD])
    assert (await response.get_json())["removed"] == [CAFE_NFC]
    assert await stored_tags(pool, tenant, contact_id) == []


async def test_patch_tags_replaces_with_normalised_tags(client, pool, tenant):
    contact_id = await create_contact(client, tenant)
    response = await client.patch(
        f"{CONTACTS}/{contact_id}",
        json={"tags": ["\uff36\uff29\uff30", "vip\u200b", CAFE_NFD, CAFE_NFC, "\ufeff"]},
        headers=tenant.headers,
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert await stored_tags(pool, tenant, contact_id) == ["vip", CAFE_NFC]


async def test_tag_summary_counts_look_alikes_as_one_tag(client, pool, tenant):
    await tagged(client, tenant, pool, ["vip"])
    await tagged(client, tenant, pool, ["\uff36\uff29\uff30"])
    await tagged(client, tenant, pool, ["v\u200bip"])
    body = await (await client.get(f"{BASE}/tags", headers=tenant.headers)).get_json()
    assert body["tags"] == [{"tag": "vip", "count": 3}]


@pytest.mark.parametrize("look_alike", VIP_LOOK_ALIKES)
async def test_contact_tag_filter_matches_look_alikes(client, pool, tenant, look_alike):
    vip = await tagged(client, tenant, pool, ["vip"])
    await tagged(client, tenant, pool, ["lead"])
    response = await client.get(
        f"{CONTACTS}?{urlencode([('tag', look_alike)])}", headers=tenant.headers
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    assert [contact["id"] for contact in body["contacts"]] == [vip]
    assert body["total"] == 1


async def test_contact_tag_filter_of_zero_width_characters_only_is_400(client, tenant):
    response = await client.get(
        f"{CONTACTS}?{urlencode([('tag', chr(0x200B))])}", headers=tenant.headers
    )
    error = await response.get_json()
    assert response.status_code == 400
    assert error["error"]["code"] == "validation_error"
    assert [detail["field"] for detail in error["error"]["details"]] == ["tag"]


async def test_smart_list_tags_are_normalised_and_match_look_alikes(client, pool, tenant):
    await tagged(client, tenant, pool, ["vip"])
    await tagged(client, tenant, pool, [CAFE_NFC])
    await tagged(client, tenant, pool, ["other"])
    response = await client.post(
        SMART_LISTS,
        json={"name": "Look-alikes", "tags": ["\uff36\uff29\uff30", "v\u200bip", CAFE_NFD]},
        headers=tenant.headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    smart_list = (await response.get_json())["smart_list"]
    assert (smart_list["tags"], smart_list["contact_count"]) == (["vip", CAFE_NFC], 2)


async def test_smart_list_of_zero_width_tags_only_is_tags_required(client, pool, tenant):
    response = await client.post(
        SMART_LISTS, json={"name": "x", "tags": ["\u200b", "\ufeff "]}, headers=tenant.headers
    )
    assert await error_code(response, 400) == "tags_required"
    assert await tenant_sql(pool, tenant, "SELECT * FROM smart_lists") == []
