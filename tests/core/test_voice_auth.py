"""Every voice operation takes a sub-account key: none, an unknown one or an agency key is 401."""

from __future__ import annotations

import pytest

# A fixed id: the same in every process, as pytest-xdist's workers must collect alike.
ID = "2c9d7e1f-8a3b-4c5d-9e6f-0a1b2c3d4e5f"
ROUTES = [
    ("POST", "/functions/v1/crm-api/create-agent"),
    ("GET", "/webhooks/inbound/agents"),
    ("GET", f"/webhooks/inbound/agents/{ID}"),
    ("PATCH", f"/webhooks/inbound/agents/{ID}"),
    ("DELETE", f"/webhooks/inbound/agents/{ID}"),
    ("PUT", "/webhooks/inbound/integrations/openai"),
    ("GET", "/webhooks/inbound/integrations"),
    ("GET", "/webhooks/inbound/phone-numbers"),
    ("GET", f"/webhooks/inbound/phone-numbers/{ID}"),
    ("DELETE", f"/webhooks/inbound/phone-numbers/{ID}"),
    ("POST", f"/webhooks/inbound/phone-numbers/{ID}/agent"),
    ("POST", "/webhooks/inbound/phone-numbers/purchase"),
    ("POST", "/webhooks/inbound/phone-numbers/import"),
    ("POST", "/webhooks/inbound/number-pools"),
    ("GET", f"/webhooks/inbound/number-pools/{ID}"),
    ("POST", f"/webhooks/inbound/contacts/{ID}/call"),
    ("GET", f"/webhooks/inbound/calls/{ID}"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_voice_route_without_a_sub_account_key_is_401(client, tenant, method, path):
    for headers, code in (
        ({}, "missing_api_key"),
        ({"x-api-key": "sb_" + "x" * 43}, "invalid_api_key"),
        (tenant.organisation.headers, "invalid_api_key"),
    ):
        response = await client.open(path, method=method, json={}, headers=headers)
        assert response.status_code == 401, (path, await response.get_data(as_text=True))
        assert (await response.get_json())["error"]["code"] == code
