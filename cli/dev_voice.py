"""`switchboard dev`'s voice set-up (CONTRACT 9): the fake vendors as a stand-in for the LLM and
speech vendors, and a demo agent, number and contact so a first sandbox call needs no vendor key.

The fake vendors run in the dev process; every SWITCHBOARD_<VENDOR>_BASE_URL points at them
unless SWITCHBOARD_DEV_REAL_VENDORS=true (then the settings, or the vendors' public APIs, apply
and the sub-account needs real keys). The demo agent is made through the API, as a user would.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import httpx

from voice.fake_vendors import FakeVendors

REAL_VENDORS = "SWITCHBOARD_DEV_REAL_VENDORS"
# A number of the sandbox's person script (CONTRACT 6): it says "Hello?" and answers each turn.
DEMO_CONTACT_PHONE = "+14155552671"
DEMO_PROMPT = (
    "You are Sam, a friendly assistant for Demo Agency. Keep every answer to one short sentence. "
    "If the contact has a minute, find a free consultation slot with check_availability and "
    "offer the first; once they agree, book it with book_appointment."
)
# What the stand-in model is scripted to do with that prompt (voice/fake_vendors): look for free
# slots when the contact says they have a minute, book the first one offered when they say it
# sounds good. Left out with real vendors, where the model follows the prompt itself.
DEMO_SCRIPT = " [fake:call=check_availability on=minute] [fake:call=book_appointment on=good]"
# The demo sub-account's calendar, which the demo agent's two calendar tools work on.
DEMO_CALENDAR = {
    "name": "Consultations",
    "timezone": "America/Los_Angeles",
    "availability": [
        {"day": day, "start": "09:00", "end": "17:00"}
        for day in ("mon", "tue", "wed", "thu", "fri")
    ],
}
DEMO_TOOLS = (
    ("check_availability", "Find free consultation slots, from a day (YYYY-MM-DD) on."),
    ("book_appointment", "Book the contact into a free consultation slot by its start."),
)

# The post-call analysis the demo call shows (the fake LLM fills the data in: voice/fake_vendors).
DEMO_ANALYSIS = {
    "summary": True,
    "success_criteria": "A consultation was booked.",
    "data_schema": {
        "type": "object",
        "required": ["booked", "interested"],
        "properties": {
            "booked": {"type": "boolean", "description": "Whether a consultation was booked."},
            "interested": {"type": "boolean", "description": "Whether the contact is interested."},
            "first_words": {"type": "string", "description": "What the contact said first."},
        },
    },
}


def wants_real_vendors() -> bool:
    return os.environ.get(REAL_VENDORS, "").strip().lower() in ("1", "true", "yes")


async def start_fake_vendors() -> FakeVendors:
    """The fake vendors on a free loopback port, and this process's settings pointed at them."""
    vendors = FakeVendors()
    await vendors.start("127.0.0.1", 0)
    os.environ.update(vendors.env)
    return vendors


async def make_demo_agent(
    base_url: str, sub_account_id: uuid.UUID, organisation_id: uuid.UUID, sub_key: str
) -> str:
    """A placeholder OpenAI key, a calendar, an agent with its two calendar tools and a purchased
    number, a contact; the curl that calls the contact (for the banner)."""
    headers = {"x-api-key": sub_key}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:
        await _ready(http)
        await _ok(
            http.put(
                "/webhooks/inbound/integrations/openai",
                json={"api_key": "sk-placeholder-for-the-fake-vendors"},
            )
        )
        calendar = await _ok(http.post("/webhooks/inbound/calendars", json=DEMO_CALENDAR))
        tool_ids = []
        for kind, description in DEMO_TOOLS:
            tool = await _ok(
                http.post(
                    "/webhooks/inbound/tools",
                    json={
                        "name": kind,
                        "type": kind,
                        "description": description,
                        "config": {"calendar_id": calendar["calendar"]["id"]},
                    },
                )
            )
            tool_ids.append(tool["tool"]["id"])
        agent = await _ok(
            http.post(
                "/functions/v1/crm-api/create-agent",
                json={
                    "name": "Demo agent",
                    "voice_id": "openai/alloy",
                    "max_duration": 5,
                    "temperature": 0.7,
                    "silence_timeout": 10,
                    "voice_activity_timeout": 700,
                    "llm_model": "gpt-4o-mini",
                    "language": "en-US",
                    "background_noise": False,
                    "voicemail_detection": False,
                    "backcchanneling": False,
                    "webhook": False,
                    "recording": True,
                    "prompt": DEMO_PROMPT + ("" if wants_real_vendors() else DEMO_SCRIPT),
                    "analysis": DEMO_ANALYSIS,
                    "tool_ids": tool_ids,
                    "first_message": "Hi, this is Sam from Demo Agency. Do you have a minute?",
                    "organization_id": str(organisation_id),
                    "sub_account_id": str(sub_account_id),
                },
            )
        )
        number = await _ok(http.post("/webhooks/inbound/phone-numbers/purchase", json={}))
        number_id = number["phone_number"]["id"]
        await _ok(
            http.post(
                f"/webhooks/inbound/phone-numbers/{number_id}/agent", json={"agent_id": agent["id"]}
            )
        )
        contact = await _ok(
            http.post(
                "/webhooks/inbound/contacts",
                json={"name": "Demo Contact", "phone": DEMO_CONTACT_PHONE},
            )
        )
    return (
        f"curl -X POST -H 'x-api-key: {sub_key}' -H 'content-type: application/json' "
        f'-d \'{{"agent_id": "{agent["id"]}"}}\' '
        f"{base_url}/webhooks/inbound/contacts/{contact['contact_id']}/call"
    )


async def api_ready(base_url: str) -> None:
    """Returns once the API at base_url answers its health check (RuntimeError after 30 s)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=2) as http:
        await _ready(http)


async def _ready(http: httpx.AsyncClient) -> None:
    for _ in range(300):
        try:
            if (await http.get("/healthz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("the API did not come up for the demo agent")


async def _ok(request: Any) -> Any:
    response = await request
    if response.status_code >= 300:
        raise RuntimeError(
            f"demo set-up: {response.request.url.path} answered "
            f"{response.status_code}: {response.text[:300]}"
        )
    return response.json()
