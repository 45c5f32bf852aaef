"""create-agent's prompt, first_message and transcriber, and the speech vendors an agent needs."""

from __future__ import annotations

import pytest

from api.agents.voices import default_transcriber, speech_vendor_of
from tests.factories import agent_body, connect
from tests.helpers import expect_error, tenant_sql

CREATE = "/functions/v1/crm-api/create-agent"
AGENTS = "/webhooks/inbound/agents"


async def create(client, tenant, **overrides):
    return await client.post(CREATE, json=agent_body(tenant, **overrides), headers=tenant.headers)


async def created(client, tenant, **overrides):
    response = await create(client, tenant, **overrides)
    assert response.status_code == 201, await response.get_data(as_text=True)
    agent_id = (await response.get_json())["id"]
    body = await (await client.get(f"{AGENTS}/{agent_id}", headers=tenant.headers)).get_json()
    return body["agent"]


async def stored(pool, tenant, column):
    rows = await tenant_sql(pool, tenant, f"SELECT {column} AS value FROM agents")
    return [row["value"] for row in rows]


async def agent_count(pool, tenant):
    return (await tenant_sql(pool, tenant, "SELECT count(*) AS n FROM agents"))[0]["n"]


# --- speech_vendor_of -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("voice_id", "expected"),
    [
        ("openai/alloy", ("openai", "alloy")),
        ("elevenlabs/21m00Tcm4TlvDq8ikWAM", ("elevenlabs", "21m00Tcm4TlvDq8ikWAM")),
        ("deepgram/aura-2-thalia-en", ("deepgram", "aura-2-thalia-en")),
        (
            "cartesia/a0e99841-438c-4a64-b679-ae501e7d6091",
            ("cartesia", "a0e99841-438c-4a64-b679-ae501e7d6091"),
        ),
        ("alloy", ("openai", "alloy")),
        ("azure/jenny", ("openai", "azure/jenny")),
        ("ElevenLabs/x", ("openai", "ElevenLabs/x")),
        ("elevenlabs/a/b", ("elevenlabs", "a/b")),
    ],
)
def test_voice_id_prefix_picks_the_speech_vendor(voice_id, expected):
    assert speech_vendor_of(voice_id) == expected


@pytest.mark.parametrize(
    ("connected", "expected"),
    [
        ({"openai", "deepgram"}, "openai"),
        ({"deepgram"}, "deepgram"),
        ({"anthropic"}, None),
        (set(), None),
    ],
)
def test_default_transcriber_is_the_first_connected(connected, expected):
    assert default_transcriber(connected) == expected


# --- the new fields ---------------------------------------------------------------------------


async def test_create_agent_new_fields_default_to_empty_prompt_null_message(client, pool, tenant):
    await connect(client, tenant)
    agent = await created(client, tenant)
    assert agent["prompt"] == ""
    assert agent["first_message"] is None
    assert agent["transcriber"] == "openai"
    assert await stored(pool, tenant, "prompt") == [""]


async def test_create_agent_stores_prompt_first_message_and_transcriber(client, pool, tenant):
    await connect(client, tenant)
    await connect(client, tenant, "deepgram")
    agent = await created(
        client,
        tenant,
        prompt="You sell solar panels.",
        first_message="Hi, this is Sam from Sunny.",
        transcriber="deepgram",
    )
    assert (agent["prompt"], agent["first_message"], agent["transcriber"]) == (
        "You sell solar panels.",
        "Hi, this is Sam from Sunny.",
        "deepgram",
    )
    rows = await tenant_sql(pool, tenant, "SELECT prompt, first_message, transcriber FROM agents")
    assert [tuple(row.values()) for row in rows] == [
        ("You sell solar panels.", "Hi, this is Sam from Sunny.", "deepgram")
    ]
    listed = await (await client.get(AGENTS, headers=tenant.headers)).get_json()
    assert listed["agents"][0]["transcriber"] == "deepgram"
    assert listed["agents"][0]["first_message"] == "Hi, this is Sam from Sunny."


async def test_create_agent_prompt_of_20000_characters_is_accepted(client, pool, tenant):
    await connect(client, tenant)
    agent = await created(client, tenant, prompt="p" * 20_000)
    assert len(agent["prompt"]) == 20_000


async def test_create_agent_first_message_of_1000_characters_is_accepted(client, tenant):
    await connect(client, tenant)
    agent = await created(client, tenant, first_message="m" * 1000)
    assert len(agent["first_message"]) == 1000


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("prompt", "p" * 20_001),
        ("prompt", None),
        ("prompt", 5),
        ("first_message", "m" * 1001),
        ("first_message", ""),
        ("first_message", "  "),
        ("first_message", 5),
        ("transcriber", "whisper"),
        ("transcriber", "OpenAI"),
        ("transcriber", "elevenlabs"),
        ("transcriber", 1),
        ("background_type", "jungle"),
        ("voice_id", "elevenlabs/"),
        ("voice_id", "openai/"),
    ],
)
async def test_create_agent_field_out_of_bounds_is_400(client, pool, tenant, field, value):
    await connect(client, tenant)
    await connect(client, tenant, "elevenlabs")
    response = await create(
        client, tenant, background_noise=field == "background_type", **{field: value}
    )
    body = await expect_error(response, 400, "validation_error")
    assert field in [detail["field"] for detail in body["error"]["details"]]
    assert await agent_count(pool, tenant) == 0


@pytest.mark.parametrize("background_type", ["office", "cafe", "call_center"])
async def test_create_agent_background_type_of_the_list_is_accepted(
    client, tenant, background_type
):
    await connect(client, tenant)
    agent = await created(client, tenant, background_noise=True, background_type=background_type)
    assert agent["background_type"] == background_type


async def test_create_agent_transcriber_defaults_to_deepgram_when_openai_is_not_connected(
    client, tenant
):
    await connect(client, tenant, "anthropic")
    await connect(client, tenant, "deepgram")
    agent = await created(
        client, tenant, llm_model="claude-3.5-haiku", voice_id="deepgram/aura-2-thalia-en"
    )
    assert agent["transcriber"] == "deepgram"


async def test_create_agent_explicit_null_transcriber_is_the_default(client, tenant):
    await connect(client, tenant)
    agent = await created(client, tenant, transcriber=None)
    assert agent["transcriber"] == "openai"


async def test_create_agent_without_any_transcriber_vendor_is_400(client, pool, tenant):
    # given a model and a voice connected, but neither openai nor deepgram to transcribe
    await connect(client, tenant, "anthropic")
    await connect(client, tenant, "elevenlabs")
    response = await create(client, tenant, llm_model="claude-3.5-haiku", voice_id="elevenlabs/abc")
    # then the agent is refused now, not every call of it later, and nothing is stored
    body = await expect_error(response, 400, "speech_provider_not_connected")
    assert "openai or deepgram" in body["error"]["message"]
    assert await tenant_sql(pool, tenant, "SELECT id FROM agents") == []


async def test_patch_of_an_agent_left_without_a_transcriber_vendor_is_400(client, pool, tenant):
    # given an agent stored without a transcriber (made when that was accepted)
    await connect(client, tenant, "anthropic")
    await connect(client, tenant, "elevenlabs")
    await connect(client, tenant, "deepgram")
    agent = await created(client, tenant, llm_model="claude-3.5-haiku", voice_id="elevenlabs/abc")
    await tenant_sql(pool, tenant, "UPDATE agents SET transcriber = NULL")
    await tenant_sql(pool, tenant, "DELETE FROM integrations WHERE provider = 'deepgram'")
    # when it is changed, then the create rules refuse it as it would be afterwards
    response = await client.patch(
        f"/webhooks/inbound/agents/{agent['id']}", json={"name": "Renamed"}, headers=tenant.headers
    )
    await expect_error(response, 400, "speech_provider_not_connected")
    [row] = await tenant_sql(pool, tenant, "SELECT name FROM agents")
    assert row["name"] != "Renamed"


# --- vendors that must be connected -------------------------------------------------------------


@pytest.mark.parametrize(
    ("voice_id", "vendor"),
    [
        ("openai/alloy", "openai"),
        ("alloy", "openai"),
        ("elevenlabs/abc", "elevenlabs"),
        ("deepgram/aura-2-thalia-en", "deepgram"),
        ("cartesia/abc", "cartesia"),
    ],
)
async def test_create_agent_voice_of_unconnected_vendor_is_400(
    client, pool, tenant, voice_id, vendor
):
    await connect(client, tenant, "anthropic")
    for other in ("openai", "deepgram", "elevenlabs", "cartesia"):
        if other != vendor:
            await connect(client, tenant, other)
    response = await create(
        client,
        tenant,
        llm_model="claude-3-haiku",
        voice_id=voice_id,
        transcriber="deepgram" if vendor == "openai" else "openai",
    )
    await expect_error(response, 400, "speech_provider_not_connected")
    assert await agent_count(pool, tenant) == 0


@pytest.mark.parametrize(
    ("voice_id", "vendor"),
    [
        ("openai/alloy", "openai"),
        ("elevenlabs/abc", "elevenlabs"),
        ("deepgram/aura-2-thalia-en", "deepgram"),
        ("cartesia/abc", "cartesia"),
    ],
)
async def test_create_agent_voice_of_connected_vendor_is_201(client, tenant, voice_id, vendor):
    await connect(client, tenant)
    await connect(client, tenant, vendor)
    agent = await created(client, tenant, voice_id=voice_id)
    assert agent["voice_id"] == voice_id


@pytest.mark.parametrize("transcriber", ["openai", "deepgram"])
async def test_create_agent_transcriber_of_unconnected_vendor_is_400(
    client, pool, tenant, transcriber
):
    await connect(client, tenant, "anthropic")
    await connect(client, tenant, "elevenlabs")
    await connect(client, tenant, "deepgram" if transcriber == "openai" else "openai")
    response = await create(
        client,
        tenant,
        llm_model="claude-3-haiku",
        voice_id="elevenlabs/abc",
        transcriber=transcriber,
    )
    await expect_error(response, 400, "speech_provider_not_connected")
    assert await agent_count(pool, tenant) == 0


async def test_create_agent_llm_vendor_is_checked_before_the_speech_vendors(client, tenant):
    await connect(client, tenant, "deepgram")
    response = await create(client, tenant, voice_id="elevenlabs/abc")
    await expect_error(response, 400, "llm_provider_not_connected")


async def test_create_agent_speech_vendor_of_another_sub_account_does_not_count(
    client, tenant, tenant_second
):
    await connect(client, tenant)
    await connect(client, tenant_second, "cartesia")
    response = await create(client, tenant, voice_id="cartesia/abc")
    await expect_error(response, 400, "speech_provider_not_connected")
