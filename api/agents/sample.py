"""One valid create-agent body, for the tests and the benchmarks (which share no other code)."""

from __future__ import annotations


def create_agent_body(
    organisation_id: object, sub_account_id: object, /, **fields: object
) -> dict[str, object]:
    """A valid create-agent body (no webhook, no recording, the sandbox's voice and model) with
    `fields` on top (the ids too: they are positional only, so a field may replace them)."""
    return {
        "name": "Agent",
        "voice_id": "alloy",
        "max_duration": 10,
        "temperature": 0.7,
        "silence_timeout": 5,
        "voice_activity_timeout": 300,
        "llm_model": "gpt-4o",
        "language": "en-US",
        "background_noise": False,
        "voicemail_detection": False,
        "backcchanneling": False,
        "webhook": False,
        "recording": False,
        "organization_id": str(organisation_id),
        "sub_account_id": str(sub_account_id),
    } | fields
