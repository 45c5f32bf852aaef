"""create-agent, the agent reads and the LLM provider integrations."""

from __future__ import annotations

import re
import uuid

import pytest

from tenancy.secrets import decrypt
from tests.factories import agent_body, connect, make_agent
from tests.helpers import expect_error, tenant_sql

CREATE = "/functions/v1/crm-api/create-agent"
AGENTS = "/webhooks/inbound/agents"

REQUIRED = [
    "name",
    "voice_id",
    "max_duration",
    "temperature",
    "silence_timeout",
    "voice_activity_timeout",
    "llm_model",
    "language",
    "background_noise",
    "voicemail_detection",
    "backcchanneling",
    "organization_id",
    "sub_account_id",
    "webhook",
    "recording",
]

MODELS = {
    "openai": [
        "gpt-5.1",
        "gpt-5",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4.1-nano",
        "gpt-4o",
        "gpt-4o-mini",
    ],
    "anthropic": [
        "claude-opus-4.5",
        "claude-opus-4",
        "claude-sonnet-4",
        "claude-3.5-sonnet",
        "claude-3.5-haiku",
        "claude-3-opus",
        "claude-3-haiku",
    ],
    "google": [
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
        "gemini-2.0-flash",
        "gemini-1.5-pro",
        "gemini-1.5-flash",
    ],
    "deepseek": ["deepseek-chat", "deepseek-reasoner", "deepseek-coder"],
    "grok": ["grok-3", "grok-3-mini", "grok-2", "grok-2-vision"],
}


async def create(client, tenant, **overrides):
    return await client.post(CREATE, json=agent_body(tenant, **overrides), headers=tenant.headers)


async def agent_count(pool, tenant):
    return (await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM agents"))[0]["n"]


async def test_create_agent_is_201_with_id_name_is_active_created_at(client, tenant):
    await connect(client, tenant)
    response = await create(client, tenant)
    assert response.status_code == 201
    body = await response.get_json()
    assert body["success"] is True
    assert uuid.UUID(body["id"])
    assert body["name"] == "Sales agent"
    assert body["is_active"] is True
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", body["created_at"])


async def test_create_agent_is_active_false_is_kept(client, tenant):
    await connect(client, tenant)
    response = await create(client, tenant, is_active=False)
    assert response.status_code == 201
    assert (await response.get_json())["is_active"] is False


@pytest.mark.parametrize("field", REQUIRED)
async def test_create_agent_missing_required_field_is_400(client, pool, tenant, field):
    await connect(client, tenant)
    response = await create(client, tenant, **{field: ...})
    body = await expect_error(response, 400, "validation_error")
    assert field in [detail["field"] for detail in body["error"]["details"]]
    assert await agent_count(pool, tenant) == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", ""),
        ("name", "   "),
        ("voice_id", ""),
        ("voice_id", "v" * 101),
        ("voice_id", 7),
        ("max_duration", 0),
        ("max_duration", -1),
        ("max_duration", "10"),
        ("temperature", -0.1),
        ("temperature", 1.01),
        ("temperature", "0.5"),
        ("temperature", True),
        ("silence_timeout", 0),
        ("silence_timeout", -3),
        ("voice_activity_timeout", 0),
        ("language", "en"),
        ("language", "EN-us"),
        ("language", "en_US"),
        ("language", "eng-USA"),
        ("background_noise", "true"),
        ("voicemail_detection", 1),
        ("backcchanneling", None),
        ("webhook", "yes"),
        ("recording", None),
        ("is_active", "false"),
    ],
)
async def test_create_agent_invalid_value_is_400(client, pool, tenant, field, value):
    await connect(client, tenant)
    response = await create(client, tenant, **{field: value})
    body = await expect_error(response, 400, "validation_error")
    assert field in [detail["field"] for detail in body["error"]["details"]]
    assert await agent_count(pool, tenant) == 0


async def test_create_agent_temperature_bounds_are_inclusive(client, tenant):
    await connect(client, tenant)
    for value in (0, 0.0, 1, 1.0):
        assert (await create(client, tenant, temperature=value)).status_code == 201


async def test_create_agent_backchanneling_spelled_otherwise_is_not_accepted(client, tenant):
    await connect(client, tenant)
    body = agent_body(tenant, backcchanneling=...)
    body["backchanneling"] = True
    response = await client.post(CREATE, json=body, headers=tenant.headers)
    details = (await expect_error(response, 400, "validation_error"))["error"]["details"]
    assert [d["field"] for d in details] == ["backcchanneling"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"background_noise": True}, "background_type"),
        ({"background_noise": True, "background_type": ""}, "background_type"),
        ({"voicemail_detection": True}, "voicemail_type"),
        ({"voicemail_detection": True, "voicemail_type": "beep"}, "voicemail_type"),
        ({"voicemail_detection": True, "voicemail_type": "leave_message"}, "voicemail_message"),
        (
            {
                "voicemail_detection": True,
                "voicemail_type": "leave_message",
                "voicemail_message": " ",
            },
            "voicemail_message",
        ),
        ({"webhook": True}, "webhook_url"),
        ({"webhook": True, "webhook_url": "ftp://example.com/x"}, "webhook_url"),
        ({"webhook": True, "webhook_url": "not a url"}, "webhook_url"),
    ],
)
async def test_create_agent_conditional_field_missing_or_invalid_is_400(
    client, pool, tenant, overrides, field
):
    await connect(client, tenant)
    response = await create(client, tenant, **overrides)
    body = await expect_error(response, 400, "validation_error")
    assert field in [detail["field"] for detail in body["error"]["details"]]
    assert await agent_count(pool, tenant) == 0


async def test_create_agent_with_every_conditional_field_is_stored(client, tenant):
    await connect(client, tenant)
    response = await create(
        client,
        tenant,
        background_noise=True,
        background_type="office",
        voicemail_detection=True,
        voicemail_type="leave_message",
        voicemail_message="Please call us back.",
        webhook=True,
        webhook_url="https://example.com/post-call",
    )
    assert response.status_code == 201
    agent_id = (await response.get_json())["id"]
    agent = (await (await client.get(f"{AGENTS}/{agent_id}", headers=tenant.headers)).get_json())[
        "agent"
    ]
    assert agent["background_type"] == "office"
    assert agent["voicemail_type"] == "leave_message"
    assert agent["voicemail_message"] == "Please call us back."
    assert agent["webhook_url"] == "https://example.com/post-call"


async def test_create_agent_voicemail_hangup_needs_no_message(client, tenant):
    await connect(client, tenant)
    response = await create(client, tenant, voicemail_detection=True, voicemail_type="hangup")
    assert response.status_code == 201


async def test_create_agent_unknown_model_is_400(client, tenant):
    await connect(client, tenant)
    response = await create(client, tenant, llm_model="gpt-3")
    body = await expect_error(response, 400, "validation_error")
    assert body["error"]["details"][0]["field"] == "llm_model"


@pytest.mark.parametrize(
    ("provider", "model"), [(p, m) for p, models in MODELS.items() for m in models]
)
async def test_create_agent_accepts_every_model_of_a_connected_provider(
    client, tenant, provider, model
):
    await connect(client, tenant, provider)
    await connect(client, tenant, "openai")  # the voice's vendor
    assert (await create(client, tenant, llm_model=model)).status_code == 201


@pytest.mark.parametrize("provider", list(MODELS))
async def test_create_agent_model_of_unconnected_provider_is_400(client, pool, tenant, provider):
    others = [p for p in MODELS if p != provider]
    for other in others:
        await connect(client, tenant, other)
    response = await create(client, tenant, llm_model=MODELS[provider][0])
    await expect_error(response, 400, "llm_provider_not_connected")
    assert await agent_count(pool, tenant) == 0


@pytest.mark.parametrize("field", ["organization_id", "sub_account_id"])
async def test_create_agent_non_uuid_scope_id_is_400_invalid_uuid(client, tenant, field):
    await connect(client, tenant)
    await expect_error(await create(client, tenant, **{field: "not-a-uuid"}), 400, "invalid_uuid")


async def test_create_agent_other_organisation_is_403(client, pool, tenant, tenant_second):
    await connect(client, tenant)
    response = await create(client, tenant, organization_id=str(tenant_second.organisation.id))
    await expect_error(response, 403, "forbidden")
    assert await agent_count(pool, tenant) == 0


async def test_create_agent_other_sub_account_is_403(client, pool, tenant, tenant_second):
    await connect(client, tenant)
    await expect_error(
        await create(client, tenant, sub_account_id=str(tenant_second.id)), 403, "forbidden"
    )
    await expect_error(
        await create(client, tenant, sub_account_id=str(uuid.uuid4())), 403, "forbidden"
    )
    assert await agent_count(pool, tenant) == 0
    assert await agent_count(pool, tenant_second) == 0


async def test_create_agent_without_key_is_401(client, tenant):
    response = await client.post(CREATE, json=agent_body(tenant))
    await expect_error(response, 401, "missing_api_key")


async def test_create_agent_with_agency_key_is_401(client, tenant):
    response = await client.post(
        CREATE, json=agent_body(tenant), headers=tenant.organisation.headers
    )
    await expect_error(response, 401, "invalid_api_key")


async def test_create_agent_private_webhook_url_is_checked_by_setting(client, app, tenant):
    await connect(client, tenant)
    settings = app.app.config["SETTINGS"]
    saved = settings.allow_private_webhooks
    settings.allow_private_webhooks = False
    try:
        response = await create(client, tenant, webhook=True, webhook_url="http://127.0.0.1:9/hook")
    finally:
        settings.allow_private_webhooks = saved
    await expect_error(response, 400, "webhook_url_not_allowed")


# --- reads ------------------------------------------------------------------------------------


async def test_get_agent_returns_full_configuration_and_webhook_secret(client, tenant):
    agent_id = await make_agent(
        client, tenant, webhook=True, webhook_url="https://example.com/hook"
    )
    response = await client.get(f"{AGENTS}/{agent_id}", headers=tenant.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success"
    agent = body["agent"]
    expected = agent_body(tenant, webhook=True, webhook_url="https://example.com/hook")
    for key, value in expected.items():
        assert agent[key] == value, key
    assert agent["is_active"] is True
    assert re.match(r"^whsec_[A-Za-z0-9+/]+=*$", agent["webhook_secret"])


async def test_agents_have_distinct_webhook_secrets(client, tenant):
    first = await make_agent(client, tenant)
    second = await make_agent(client, tenant)
    secrets = set()
    for agent_id in (first, second):
        body = await (await client.get(f"{AGENTS}/{agent_id}", headers=tenant.headers)).get_json()
        secrets.add(body["agent"]["webhook_secret"])
    assert len(secrets) == 2


async def test_list_agents_paginates_newest_first(client, tenant):
    ids = [await make_agent(client, tenant, name=f"Agent {n}") for n in range(3)]
    response = await client.get(f"{AGENTS}?limit=2", headers=tenant.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["total"] == 3 and body["limit"] == 2 and body["offset"] == 0
    assert body["has_more"] is True
    assert [a["id"] for a in body["agents"]] == [ids[2], ids[1]]
    assert all(a["webhook_secret"].startswith("whsec_") for a in body["agents"])


async def test_list_agents_limit_over_100_is_400(client, tenant):
    response = await client.get(f"{AGENTS}?limit=101", headers=tenant.headers)
    assert response.status_code == 400


async def test_get_agent_invalid_id_is_400(client, tenant):
    response = await client.get(f"{AGENTS}/nope", headers=tenant.headers)
    await expect_error(response, 400, "invalid_uuid")


async def test_get_agent_missing_is_404(client, tenant):
    response = await client.get(f"{AGENTS}/{uuid.uuid4()}", headers=tenant.headers)
    await expect_error(response, 404, "not_found")


async def test_get_agent_of_another_sub_account_is_404(client, tenant, tenant_second):
    other = await make_agent(client, tenant_second)
    response = await client.get(f"{AGENTS}/{other}", headers=tenant.headers)
    await expect_error(response, 404, "not_found")
    listed = await (await client.get(AGENTS, headers=tenant.headers)).get_json()
    assert listed["agents"] == []


# --- integrations -----------------------------------------------------------------------------


async def test_connect_provider_stores_key_and_never_echoes_it(client, pool, tenant):
    response = await client.put(
        "/webhooks/inbound/integrations/anthropic",
        json={"api_key": "sk-ant-secret-123"},
        headers=tenant.headers,
    )
    assert response.status_code == 200
    text = await response.get_data(as_text=True)
    assert "sk-ant-secret-123" not in text
    assert await response.get_json() == {
        "status": "success",
        "provider": "anthropic",
        "connected": True,
    }
    rows = await tenant_sql(pool, tenant, "SELECT provider, api_key FROM integrations")
    # Stored encrypted (CONTRACT 8).
    assert [(r["provider"], decrypt(r["api_key"])) for r in rows] == [
        ("anthropic", "sk-ant-secret-123")
    ]
    assert "sk-ant-secret-123" not in rows[0]["api_key"]
    listed = await client.get("/webhooks/inbound/integrations", headers=tenant.headers)
    assert "sk-ant-secret-123" not in await listed.get_data(as_text=True)
    states = {i["provider"]: i["connected"] for i in (await listed.get_json())["integrations"]}
    assert states == {
        "openai": False,
        "anthropic": True,
        "google": False,
        "deepseek": False,
        "grok": False,
        "deepgram": False,
        "elevenlabs": False,
        "cartesia": False,
    }


async def test_connect_provider_again_replaces_the_key(client, pool, tenant):
    for key in ("sk-first", "sk-second"):
        response = await client.put(
            "/webhooks/inbound/integrations/openai", json={"api_key": key}, headers=tenant.headers
        )
        assert response.status_code == 200
    rows = await tenant_sql(pool, tenant, "SELECT api_key FROM integrations")
    assert [decrypt(r["api_key"]) for r in rows] == ["sk-second"]


async def test_connect_unknown_provider_is_404(client, tenant):
    response = await client.put(
        "/webhooks/inbound/integrations/mistral", json={"api_key": "x"}, headers=tenant.headers
    )
    await expect_error(response, 404, "not_found")


@pytest.mark.parametrize("body", [{}, {"api_key": ""}, {"api_key": "  "}, {"api_key": 5}])
async def test_connect_provider_without_key_is_400(client, tenant, body):
    response = await client.put(
        "/webhooks/inbound/integrations/openai", json=body, headers=tenant.headers
    )
    await expect_error(response, 400, "validation_error")


@pytest.mark.parametrize(
    "key",
    ["sk-clé-123", "sk-\u200b123", "sk-abc\r\nX-Injected: 1", "sk-abc def", "sk-\x00abc", "sk-😀"],
)
async def test_connect_provider_with_a_key_no_http_header_can_carry_is_400(
    client, pool, tenant, key
):
    # given a key with a character an HTTP header cannot carry (it is sent as one to the vendor)
    response = await client.put(
        "/webhooks/inbound/integrations/openai", json={"api_key": key}, headers=tenant.headers
    )
    # then it is refused now, naming the field, instead of every call failing later
    body = await expect_error(response, 400, "validation_error")
    assert [detail["field"] for detail in body["error"]["details"]] == ["api_key"]
    assert await tenant_sql(pool, tenant, "SELECT provider FROM integrations") == []


async def test_connect_provider_key_with_spaces_around_it_is_trimmed_and_accepted(
    client, pool, tenant
):
    response = await client.put(
        "/webhooks/inbound/integrations/openai",
        json={"api_key": "  sk-abc_DEF.123~  "},
        headers=tenant.headers,
    )
    assert response.status_code == 200
    [row] = await tenant_sql(pool, tenant, "SELECT api_key FROM integrations")
    assert decrypt(row["api_key"]) == "sk-abc_DEF.123~"


async def test_connect_provider_of_one_sub_account_does_not_connect_another(
    client, tenant, tenant_second
):
    await connect(client, tenant_second)
    response = await create(client, tenant)
    await expect_error(response, 400, "llm_provider_not_connected")


@pytest.mark.parametrize("provider", ["deepgram", "elevenlabs", "cartesia"])
async def test_connect_speech_vendor_stores_key_encrypted(client, pool, tenant, provider):
    response = await client.put(
        f"/webhooks/inbound/integrations/{provider}",
        json={"api_key": "speech-secret-123"},
        headers=tenant.headers,
    )
    assert await response.get_json() == {
        "status": "success",
        "provider": provider,
        "connected": True,
    }
    rows = await tenant_sql(pool, tenant, "SELECT provider, api_key FROM integrations")
    assert [(r["provider"], decrypt(r["api_key"])) for r in rows] == [
        (provider, "speech-secret-123")
    ]
    assert "speech-secret-123" not in rows[0]["api_key"]
    listed = await (
        await client.get("/webhooks/inbound/integrations", headers=tenant.headers)
    ).get_json()
    assert [i["provider"] for i in listed["integrations"] if i["connected"]] == [provider]
