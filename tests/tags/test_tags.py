"""Tags: add, remove (SPEC Tags), and the tag summary GET /tags."""

from __future__ import annotations

import uuid

from tests.factories import BASE, CONTACTS, create_contact
from tests.helpers import error_code, get_contact, tenant_sql


async def add(client, tenant, contact_id, body=None):
    url = f"{CONTACTS}/{contact_id}/tags"
    if body is None:
        return await client.post(url, headers=tenant.headers)
    return await client.post(url, json=body, headers=tenant.headers)


async def remove(client, tenant, contact_id, body=None):
    url = f"{CONTACTS}/{contact_id}/tags"
    if body is None:
        return await client.delete(url, headers=tenant.headers)
    return await client.delete(url, json=body, headers=tenant.headers)


async def summary(client, tenant):
    response = await client.get(f"{BASE}/tags", headers=tenant.headers)
    assert response.status_code == 200
    return await response.get_json()


# --- add ----------------------------------------------------------------------------------------


async def test_add_merges_and_answers_the_full_set(client, tenant):
    contact_id = await create_contact(client, tenant)
    await add(client, tenant, contact_id, {"tags": ["lead"]})
    response = await add(client, tenant, contact_id, {"tag": "VIP", "tags": ["Lead", " new "]})
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "contact_id": contact_id,
        "tags": ["lead", "vip", "new"],
        "added": ["vip", "lead", "new"],
    }
    assert (await get_contact(client, tenant, contact_id))["tags"] == ["lead", "vip", "new"]


async def test_add_single_tag_field(client, tenant):
    contact_id = await create_contact(client, tenant)
    body = await (await add(client, tenant, contact_id, {"tag": "  Hot  "})).get_json()
    assert (body["tags"], body["added"]) == (["hot"], ["hot"])


async def test_add_normalises_lowercase_trim_dedupe(client, tenant):
    contact_id = await create_contact(client, tenant)
    body = await (
        await add(client, tenant, contact_id, {"tags": ["A", " a", "a ", "B", "", "   "]})
    ).get_json()
    assert (body["tags"], body["added"]) == (["a", "b"], ["a", "b"])


async def test_add_already_present_changes_nothing(client, tenant, pool):
    contact_id = await create_contact(client, tenant)
    await add(client, tenant, contact_id, {"tags": ["a", "b"]})
    before = await get_contact(client, tenant, contact_id)
    response = await add(client, tenant, contact_id, {"tags": ["B", "a"]})
    assert response.status_code == 200
    body = await response.get_json()
    assert (body["tags"], body["added"]) == (["a", "b"], ["b", "a"])
    assert (await get_contact(client, tenant, contact_id))["updated_at"] == before["updated_at"]


async def test_add_no_tags_is_400_tags_required(client, tenant):
    contact_id = await create_contact(client, tenant)
    for body in (None, {}, {"tags": []}, {"tag": "  "}, {"tags": ["", " "]}, {"tag": None}):
        response = await add(client, tenant, contact_id, body)
        assert response.status_code == 400, body
        assert await error_code(response) == "tags_required"


async def test_add_wrong_types_are_400_validation_error(client, tenant):
    contact_id = await create_contact(client, tenant)
    for body in ({"tags": "vip"}, {"tag": 1}, {"tags": [1]}, [1], "vip"):
        response = await add(client, tenant, contact_id, body)
        assert response.status_code == 400, body
        assert await error_code(response) == "validation_error"


async def test_add_too_long_tag_is_400(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await add(client, tenant, contact_id, {"tag": "x" * 101})
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_add_non_uuid_is_400(client, tenant):
    response = await add(client, tenant, "nope", {"tag": "a"})
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_add_unknown_contact_is_404(client, tenant):
    response = await add(client, tenant, uuid.uuid4(), {"tag": "a"})
    assert response.status_code == 404
    assert await error_code(response) == "not_found"


async def test_add_without_key_is_401(client):
    response = await client.post(f"{CONTACTS}/{uuid.uuid4()}/tags", json={"tag": "a"})
    assert response.status_code == 401


# --- remove -------------------------------------------------------------------------------------


async def test_remove_answers_remaining_and_only_present_ones(client, tenant):
    contact_id = await create_contact(client, tenant)
    await add(client, tenant, contact_id, {"tags": ["a", "b", "c"]})
    response = await remove(client, tenant, contact_id, {"tag": "B", "tags": [" c ", "zzz"]})
    assert response.status_code == 200
    assert await response.get_json() == {
        "status": "success",
        "contact_id": contact_id,
        "tags": ["a"],
        "removed": ["b", "c"],
    }
    assert (await get_contact(client, tenant, contact_id))["tags"] == ["a"]


async def test_remove_absent_tags_changes_nothing(client, tenant):
    contact_id = await create_contact(client, tenant)
    await add(client, tenant, contact_id, {"tags": ["a"]})
    before = await get_contact(client, tenant, contact_id)
    body = await (await remove(client, tenant, contact_id, {"tags": ["x", "y"]})).get_json()
    assert (body["tags"], body["removed"]) == (["a"], [])
    assert (await get_contact(client, tenant, contact_id))["updated_at"] == before["updated_at"]


async def test_remove_keeps_order_of_the_rest(client, tenant):
    contact_id = await create_contact(client, tenant)
    await add(client, tenant, contact_id, {"tags": ["d", "c", "b", "a"]})
    body = await (await remove(client, tenant, contact_id, {"tag": "c"})).get_json()
    assert body["tags"] == ["d", "b", "a"]


async def test_remove_no_tags_is_400_tags_required(client, tenant):
    contact_id = await create_contact(client, tenant)
    for body in (None, {}, {"tags": []}, {"tag": ""}):
        response = await remove(client, tenant, contact_id, body)
        assert response.status_code == 400, body
        assert await error_code(response) == "tags_required"


async def test_remove_wrong_types_are_400_validation_error(client, tenant):
    contact_id = await create_contact(client, tenant)
    response = await remove(client, tenant, contact_id, {"tags": [{"a": 1}]})
    assert response.status_code == 400
    assert await error_code(response) == "validation_error"


async def test_remove_non_uuid_is_400(client, tenant):
    response = await remove(client, tenant, "nope", {"tag": "a"})
    assert response.status_code == 400
    assert await error_code(response) == "invalid_uuid"


async def test_remove_unknown_contact_is_404(client, tenant):
    response = await remove(client, tenant, uuid.uuid4(), {"tag": "a"})
    assert response.status_code == 404


async def test_remove_without_key_is_401(client):
    response = await client.delete(f"{CONTACTS}/{uuid.uuid4()}/tags", json={"tag": "a"})
    assert response.status_code == 401


# --- summary ------------------------------------------------------------------------------------


async def test_summary_counts_sorted_a_to_z(client, tenant):
    first = await create_contact(client, tenant)
    second = await create_contact(client, tenant)
    await create_contact(client, tenant)
    await add(client, tenant, first, {"tags": ["vip", "lead", "alpha"]})
    await add(client, tenant, second, {"tags": ["Lead", "zulu"]})
    body = await summary(client, tenant)
    assert body == {
        "status": "success",
        "tag_count": 4,
        "tags": [
            {"tag": "alpha", "count": 1},
            {"tag": "lead", "count": 2},
            {"tag": "vip", "count": 1},
            {"tag": "zulu", "count": 1},
        ],
    }


async def test_summary_empty(client, tenant):
    assert await summary(client, tenant) == {"status": "success", "tag_count": 0, "tags": []}


async def test_summary_ignores_limit_and_offset(client, tenant):
    contact_id = await create_contact(client, tenant)
    await add(client, tenant, contact_id, {"tags": ["a", "b"]})
    response = await client.get(f"{BASE}/tags?limit=1&offset=5", headers=tenant.headers)
    assert (await response.get_json())["tag_count"] == 2


async def test_summary_scans_only_the_newest_5000_contacts(client, tenant, pool):
    # 5001 contacts: the oldest alone carries "oldest"; every contact carries "all".
    await tenant_sql(
        pool,
        tenant,
        """
        INSERT INTO contacts (name, email, tags, created_at)
        SELECT 'c' || n, 'c' || n || '@example.com',
               CASE WHEN n = 0 THEN ARRAY['all', 'oldest'] ELSE ARRAY['all'] END,
               now() - interval '1 day' + n * interval '1 second'
        FROM generate_series(0, 5000) AS n""",
    )
    body = await summary(client, tenant)
    assert body["tags"] == [{"tag": "all", "count": 5000}]


async def test_summary_without_key_is_401(client):
    assert (await client.get(f"{BASE}/tags")).status_code == 401
