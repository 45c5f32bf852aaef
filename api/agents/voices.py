"""Speech vendors of an agent: which vendor speaks its voice_id and which one transcribes.

Pure functions of the agent's fields and the set of connected integrations, free of I/O, so
that the API's checks and the voice runtime decide the same way.
"""

from __future__ import annotations

from collections.abc import Collection

# Vendors that speak (the prefix of voice_id) and vendors that transcribe, in the order the
# default transcriber is chosen.
VOICE_VENDORS = ("openai", "elevenlabs", "deepgram", "cartesia")
TRANSCRIBERS = ("openai", "deepgram")
DEFAULT_VOICE_VENDOR = "openai"


def speech_vendor_of(voice_id: str) -> tuple[str, str]:
    """(vendor, voice) of a voice_id `provider/voice`; without a known prefix, an OpenAI voice
    named by the whole voice_id (`alloy` -> ("openai", "alloy"))."""
    prefix, slash, voice = voice_id.partition("/")
    if slash and prefix in VOICE_VENDORS:
        return prefix, voice
    return DEFAULT_VOICE_VENDOR, voice_id


def default_transcriber(connected: Collection[str]) -> str | None:
    """The first transcription vendor connected, or None when neither is."""
    return next((vendor for vendor in TRANSCRIBERS if vendor in connected), None)


def transcriber_of(transcriber: str | None, connected: Collection[str]) -> str | None:
    """The vendor that transcribes for an agent: its own, else the default one."""
    return transcriber if transcriber is not None else default_transcriber(connected)


def missing_speech_vendors(
    voice_id: str, transcriber: str | None, connected: Collection[str]
) -> list[str]:
    """The speech vendors the agent needs that are not connected (its voice's, its
    transcriber's), each once, in that order. Without a transcriber of its own the agent needs
    one of TRANSCRIBERS, named as the choice ("openai or deepgram") when none is connected."""
    needed = [
        speech_vendor_of(voice_id)[0],
        transcriber_of(transcriber, connected) or " or ".join(TRANSCRIBERS),
    ]
    return [vendor for vendor in dict.fromkeys(needed) if vendor not in connected]
