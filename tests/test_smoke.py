async def test_healthz(client):
    response = await client.get("/healthz")
    assert response.status_code == 200


async def test_provision_and_key(client, tenant):
    response = await client.get("/webhooks/inbound/team-users", headers=tenant.headers)
    assert response.status_code == 200
    assert (await response.get_json()) == {"status": "success", "users": []}
