"""Correct under concurrency: the database, not a check in Python, keeps email, phone and tags."""

from __future__ import annotations

import asyncio
from collections import Counter

from tests.factories import CONTACTS, create_contact, unique_email, unique_phone
from tests.helpers import get_contact, tenant_sql


async def test_50_concurrent_creates_with_one_email_make_one_contact(client, tenant, pool):
    email = unique_email()
    responses = await asyncio.gather(
        *(
            client.post(
                CONTACTS,
                json={"email": email.upper() if n % 2 else email, "first_name": f"N{n}"},
                headers=tenant.headers,
            )
            for n in range(50)
        )
    )
    statuses = Counter(response.status_code for response in responses)
    assert statuses == {201: 1, 200: 49}
    ids = {(await response.get_json())["contact_id"] for response in responses}
    assert len(ids) == 1
    rows = await tenant_sql(pool, tenant, "SELECT count(*) FROM contacts")
    assert rows[0][0] == 1


async def test_concurrent_creates_with_one_phone_make_one_contact(client, tenant, pool):
    phone = unique_phone()
    responses = await asyncio.gather(
        *(client.post(CONTACTS, json={"phone": phone}, headers=tenant.headers) for _ in range(30))
    )
    assert Counter(r.status_code for r in responses) == {201: 1, 200: 29}
    rows = await tenant_sql(pool, tenant, "SELECT count(*) FROM contacts")
    assert rows[0][0] == 1


async def test_concurrent_tag_adds_lose_nothing(client, tenant):
    contact_id = await create_contact(client, tenant)
    tags = [f"t{n}" for n in range(40)]
    responses = await asyncio.gather(
        *(
            client.post(f"{CONTACTS}/{contact_id}/tags", json={"tag": tag}, headers=tenant.headers)
            for tag in tags
        )
    )
    assert {r.status_code for r in responses} == {200}
    assert sorted((await get_contact(client, tenant, contact_id))["tags"]) == sorted(tags)


async def test_concurrent_tag_adds_and_removes_lose_nothing(client, tenant):
    contact_id = await create_contact(client, tenant)
    doomed = [f"old{n}" for n in range(20)]
    await client.post(
        f"{CONTACTS}/{contact_id}/tags", json={"tags": doomed + ["stay"]}, headers=tenant.headers
    )
    fresh = [f"new{n}" for n in range(20)]
    requests = [
        client.post(f"{CONTACTS}/{contact_id}/tags", json={"tag": tag}, headers=tenant.headers)
        for tag in fresh
    ]
    requests += [
        client.delete(f"{CONTACTS}/{contact_id}/tags", json={"tag": tag}, headers=tenant.headers)
        for tag in doomed
    ]
    responses = await asyncio.gather(*requests)
    assert {r.status_code for r in responses} == {200}
    removed = [tag for r in responses[len(fresh) :] for tag in (await r.get_json())["removed"]]
    assert sorted(removed) == sorted(doomed)
    assert sorted((await get_contact(client, tenant, contact_id))["tags"]) == sorted(
        fresh + ["stay"]
    )


async def test_concurrent_patches_never_leave_one_phone_on_two_contacts(client, tenant, pool):
    phone = unique_phone()
    contacts = [await create_contact(client, tenant) for _ in range(20)]
    responses = await asyncio.gather(
        *(
            client.patch(f"{CONTACTS}/{contact_id}", json={"phone": phone}, headers=tenant.headers)
            for contact_id in contacts
        )
    )
    assert Counter(r.status_code for r in responses) == {200: 1, 409: 19}
    rows = await tenant_sql(pool, tenant, "SELECT id FROM contacts WHERE phone = $1", phone)
    assert len(rows) == 1
    winner = contacts[[r.status_code for r in responses].index(200)]
    assert str(rows[0]["id"]) == winner


async def test_concurrent_patches_with_one_email_leave_it_on_one_contact(client, tenant, pool):
    email = unique_email()
    contacts = [await create_contact(client, tenant, phone=unique_phone()) for _ in range(10)]
    responses = await asyncio.gather(
        *(
            client.patch(f"{CONTACTS}/{contact_id}", json={"email": email}, headers=tenant.headers)
            for contact_id in contacts
        )
    )
    assert Counter(r.status_code for r in responses) == {200: 1, 409: 9}
    rows = await tenant_sql(pool, tenant, "SELECT count(*) FROM contacts WHERE email = $1", email)
    assert rows[0][0] == 1


async def test_concurrent_patch_tags_and_add_tags_serialise(client, tenant):
    # A PATCH replacing the set races tag adds: an add that ran before it is replaced, and
    # every add that ran after it (its answer shows "base") is kept.
    contact_id = await create_contact(client, tenant)
    adds = [
        client.post(f"{CONTACTS}/{contact_id}/tags", json={"tag": f"a{n}"}, headers=tenant.headers)
        for n in range(10)
    ]
    patch = client.patch(
        f"{CONTACTS}/{contact_id}", json={"tags": ["base"]}, headers=tenant.headers
    )
    responses = await asyncio.gather(*adds[:5], patch, *adds[5:])
    assert {r.status_code for r in responses} == {200}
    after_patch = {
        tag
        for r in responses
        if "added" in (body := await r.get_json()) and "base" in body["tags"]
        for tag in body["added"]
    }
    tags = (await get_contact(client, tenant, contact_id))["tags"]
    assert tags[0] == "base"
    assert set(tags) == {"base"} | after_patch
