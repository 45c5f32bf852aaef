"""PATCH /agents/{id}: only the fields sent change, and the create rules hold for the result."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import connect, make_agent
from tests.helpers import expect_error, tenant_sql

AGENTS = "/webhooks/inbound/agents"


async def patch(client, tenant, agent_id, body):
    return await client.patch(f"{AGENTS}/{agent_id}", json=body, headers=tenant.headers)


async def row_of(pool, tenant, agent_id):
    rows = await tenant_sql(pool, tenant, "SELECT * FROM agents WHERE id = $1", uuid.UUID(agent_id))
    return dict(rows[0])


async def test_patch_agent_changes_only_the_fields_sent(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    before = await row_of(pool, tenant, agent_id)
    response = await patch(
        client,
        tenant,
        agent_id,
        {
            "name": "  Support agent ",
            "temperature": 0.2,
            "prompt": "Be brief.",
            "first_message": "Hello!",
        },
    )
    assert response.status_code == 200
    body = await response.get_json()
    assert body["status"] == "success"
    agent = body["agent"]
    assert (
        agent["id"],
        agent["name"],
        agent["temperature"],
        agent["prompt"],
        agent["first_message"],
    ) == (agent_id, "Support agent", 0.2, "Be brief.", "Hello!")
    assert agent["webhook_secret"].startswith("whsec_")
    assert agent["organization_id"] == str(tenant.organisation.id)
    after = await row_of(pool, tenant, agent_id)
    changed = {key for key in before if before[key] != after[key]}
    assert changed == {"name", "temperature", "prompt", "first_message", "updated_at"}
    got = await (await client.get(f"{AGENTS}/{agent_id}", headers=tenant.headers)).get_json()
    assert got["agent"] == agent


async def test_patch_agent_activates_an_inactive_agent(client, pool, tenant):
    agent_id = await make_agent(client, tenant, is_active=False)
    response = await patch(client, tenant, agent_id, {"is_active": True})
    assert response.status_code == 200
    assert (await response.get_json())["agent"]["is_active"] is True
    assert (await row_of(pool, tenant, agent_id))["is_active"] is True


async def test_patch_agent_deactivates_an_agent(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    response = await patch(client, tenant, agent_id, {"is_active": False})
    assert (await response.get_json())["agent"]["is_active"] is False


async def test_patch_agent_empty_body_is_400_nothing_to_update(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    before = await row_of(pool, tenant, agent_id)
    await expect_error(await patch(client, tenant, agent_id, {}), 400, "nothing_to_update")
    assert await row_of(pool, tenant, agent_id) == before


async def test_patch_agent_scope_ids_alone_are_nothing_to_update(client, tenant):
    agent_id = await make_agent(client, tenant)
    response = await patch(
        client,
        tenant,
        agent_id,
        {"organization_id": str(uuid.uuid4()), "sub_account_id": str(uuid.uuid4())},
    )
    await expect_error(response, 400, "nothing_to_update")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"voicemail_detection": True}, "voicemail_type"),
        ({"background_noise": True}, "background_type"),
        ({"webhook": True}, "webhook_url"),
        ({"voicemail_detection": True, "voicemail_type": "leave_message"}, "voicemail_message"),
        ({"voicemail_type": "beep"}, "voicemail_type"),
        ({"background_noise": True, "background_type": "jungle"}, "background_type"),
        ({"webhook": True, "webhook_url": "ftp://example.com/x"}, "webhook_url"),
        ({"llm_model": "gpt-3"}, "llm_model"),
        ({"voice_id": "cartesia/"}, "voice_id"),
        ({"prompt": "p" * 20_001}, "prompt"),
        ({"first_message": "m" * 1001}, "first_message"),
        ({"first_message": ""}, "first_message"),
        ({"transcriber": "whisper"}, "transcriber"),
        ({"temperature": 1.5}, "temperature"),
        ({"silence_timeout": 601}, "silence_timeout"),
        ({"voice_activity_timeout": 99}, "voice_activity_timeout"),
        ({"language": "en"}, "language"),
        ({"name": None}, "name"),
        ({"prompt": None}, "prompt"),
        ({"is_active": None}, "is_active"),
        ({"voice_id": None}, "voice_id"),
        ({"webhook": None}, "webhook"),
    ],
)
async def test_patch_agent_that_breaks_a_create_rule_is_400(client, pool, tenant, body, field):
    agent_id = await make_agent(client, tenant)
    before = await row_of(pool, tenant, agent_id)
    response = await patch(client, tenant, agent_id, body)
    error = await expect_error(response, 400, "validation_error")
    assert field in [detail["field"] for detail in error["error"]["details"]]
    assert await row_of(pool, tenant, agent_id) == before


async def test_patch_agent_rules_read_the_stored_fields(client, tenant):
    agent_id = await make_agent(client, tenant, voicemail_type="hangup")
    response = await patch(client, tenant, agent_id, {"voicemail_detection": True})
    assert response.status_code == 200
    assert (await response.get_json())["agent"]["voicemail_detection"] is True


async def test_patch_agent_clearing_a_field_the_result_needs_is_400(client, tenant):
    agent_id = await make_agent(
        client, tenant, webhook=True, webhook_url="https://example.com/hook"
    )
    response = await patch(client, tenant, agent_id, {"webhook_url": None})
    await expect_error(response, 400, "validation_error")
    response = await patch(client, tenant, agent_id, {"webhook": False, "webhook_url": None})
    agent = (await response.get_json())["agent"]
    assert (agent["webhook"], agent["webhook_url"]) == (False, None)


async def test_patch_agent_private_webhook_url_is_refused_by_setting(client, app, tenant):
    agent_id = await make_agent(client, tenant)
    settings = app.app.config["SETTINGS"]
    saved = settings.allow_private_webhooks
    settings.allow_private_webhooks = False
    try:
        response = await patch(
            client, tenant, agent_id, {"webhook": True, "webhook_url": "http://127.0.0.1:9/hook"}
        )
    finally:
        settings.allow_private_webhooks = saved
    await expect_error(response, 400, "webhook_url_not_allowed")


@pytest.mark.parametrize(
    ("voice_id", "vendor"),
    [
        ("openai/alloy", "openai"),
        ("elevenlabs/abc", "elevenlabs"),
        ("deepgram/aura-2-thalia-en", "deepgram"),
        ("cartesia/abc", "cartesia"),
    ],
)
async def test_patch_agent_voice_of_unconnected_vendor_is_400(
    client, pool, tenant, voice_id, vendor
):
    await connect(client, tenant, "anthropic")
    await connect(client, tenant, "elevenlabs")
    agent_id = await make_agent(
        client, tenant, llm_model="claude-3-haiku", voice_id="elevenlabs/start"
    )  # make_agent connects openai
    await tenant_sql(pool, tenant, "DELETE FROM integrations WHERE provider = $1", vendor)
    before = await row_of(pool, tenant, agent_id)
    response = await patch(client, tenant, agent_id, {"voice_id": voice_id, "transcriber": None})
    await expect_error(response, 400, "speech_provider_not_connected")
    assert await row_of(pool, tenant, agent_id) == before


@pytest.mark.parametrize("transcriber", ["openai", "deepgram"])
async def test_patch_agent_transcriber_of_unconnected_vendor_is_400(
    client, pool, tenant, transcriber
):
    await connect(client, tenant, "elevenlabs")
    agent_id = await make_agent(client, tenant, voice_id="elevenlabs/abc")
    if transcriber == "openai":
        await connect(client, tenant, "anthropic")
        await patch(client, tenant, agent_id, {"llm_model": "claude-3-haiku"})
        await tenant_sql(pool, tenant, "DELETE FROM integrations WHERE provider = 'openai'")
    response = await patch(client, tenant, agent_id, {"transcriber": transcriber})
    await expect_error(response, 400, "speech_provider_not_connected")


async def test_patch_agent_to_a_connected_speech_vendor_is_200(client, pool, tenant):
    agent_id = await make_agent(client, tenant)
    await connect(client, tenant, "deepgram")
    await connect(client, tenant, "cartesia")
    response = await patch(
        client, tenant, agent_id, {"voice_id": "cartesia/abc", "transcriber": "deepgram"}
    )
    agent = (await response.get_json())["agent"]
    assert (agent["voice_id"], agent["transcriber"]) == ("cartesia/abc", "deepgram")
    row = await row_of(pool, tenant, agent_id)
    assert (row["voice_id"], row["transcriber"]) == ("cartesia/abc", "deepgram")


async def test_patch_agent_null_transcriber_is_the_default_one(client, tenant):
    await connect(client, tenant, "deepgram")
    agent_id = await make_agent(client, tenant, transcriber="deepgram")
    response = await patch(client, tenant, agent_id, {"transcriber": None})
    assert (await response.get_json())["agent"]["transcriber"] == "openai"


async def test_patch_agent_model_of_unconnected_provider_is_400(client, tenant):
    agent_id = await make_agent(client, tenant)
    response = await patch(client, tenant, agent_id, {"llm_model": "grok-3"})
    await expect_error(response, 400, "llm_provider_not_connected")


async def test_patch_agent_invalid_id_is_400(client, tenant):
    response = await patch(client, tenant, "nope", {"name": "x"})
    await expect_error(response, 400, "invalid_uuid")


async def test_patch_agent_missing_is_404(client, tenant):
    response = await patch(client, tenant, uuid.uuid4(), {"name": "x"})
    await expect_error(response, 404, "not_found")


async def test_patch_agent_of_another_sub_account_is_404(client, pool, tenant, tenant_second):
    other = await make_agent(client, tenant_second)
    before = await row_of(pool, tenant_second, other)
    await expect_error(await patch(client, tenant, other, {"name": "Mallory"}), 404, "not_found")
    assert await row_of(pool, tenant_second, other) == before
