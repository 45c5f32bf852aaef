"""The agent's vendors as Pipecat services: its LLM, transcriber and voice, at the base URLs of
the settings and with the sub-account's own keys (CONTRACT 6, 9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anthropic import AsyncAnthropic
from google.genai.types import HttpOptions
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.services.cartesia.tts import CartesiaHttpTTSService
from pipecat.services.deepseek.llm import DeepSeekLLMService
from pipecat.services.elevenlabs.tts import ElevenLabsHttpTTSService
from pipecat.services.google.llm import GoogleLLMService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.openai.stt import OpenAISTTService
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.services.xai.llm import GrokLLMService
from pipecat.transcriptions.language import Language

from api.agents.schemas import PROVIDER_OF_MODEL
from api.agents.voices import speech_vendor_of
from tenancy.settings import Settings

# Anthropic is asked for its own dashed API names of the SPEC's Claude ids (CONTRACT 9).
ANTHROPIC_NAMES = {
    "claude-opus-4.5": "claude-opus-4-5",
    "claude-opus-4": "claude-opus-4-0",
    "claude-sonnet-4": "claude-sonnet-4-0",
    "claude-3.5-sonnet": "claude-3-5-sonnet-latest",
    "claude-3.5-haiku": "claude-3-5-haiku-latest",
    "claude-3-opus": "claude-3-opus-latest",
    "claude-3-haiku": "claude-3-haiku-20240307",
}
OPENAI_TRANSCRIPTION_MODEL = "gpt-4o-transcribe"
OPENAI_SPEECH_MODEL = "gpt-4o-mini-tts"
OPENAI_SPEECH_RATE = 24000


class VendorMissing(Exception):
    """The agent needs a vendor the sub-account has not connected; the message is the error."""


@dataclass(frozen=True)
class AgentVoice:
    """What of the agent decides its services."""

    llm_model: str
    temperature: float
    prompt: str
    language: str
    voice_id: str
    transcriber: str | None


def _language(tag: str) -> Language:
    try:
        return Language(tag)
    except ValueError:
        return Language(tag.split("-")[0])


def _key(keys: dict[str, str], vendor: str, error: str) -> str:
    key = keys.get(vendor)
    if not key:
        raise VendorMissing(error)
    return key


def llm_service(settings: Settings, agent: AgentVoice, keys: dict[str, str]) -> Any:
    vendor = PROVIDER_OF_MODEL.get(agent.llm_model, "openai")
    key = _key(keys, vendor, f"llm_error: the {vendor} integration is not connected")
    base_url = settings.vendor_base_url(vendor)
    prompt = agent.prompt or None
    if vendor == "anthropic":
        anthropic_settings = AnthropicLLMService.Settings(
            model=ANTHROPIC_NAMES.get(agent.llm_model, agent.llm_model),
            temperature=agent.temperature, system_instruction=prompt)
        return AnthropicLLMService(api_key=key, settings=anthropic_settings,
                                   client=AsyncAnthropic(api_key=key, base_url=base_url,
                                                         max_retries=0))
    if vendor == "google":
        google_settings = GoogleLLMService.Settings(
            model=agent.llm_model, temperature=agent.temperature, system_instruction=prompt)
        return GoogleLLMService(api_key=key, settings=google_settings,
                                http_options=HttpOptions(base_url=base_url))
    kind: Any = {"deepseek": DeepSeekLLMService, "grok": GrokLLMService}.get(vendor,
                                                                         OpenAILLMService)
    return kind(api_key=key, base_url=base_url, settings=kind.Settings(
        model=agent.llm_model, temperature=agent.temperature, system_instruction=prompt))


def stt_service(settings: Settings, agent: AgentVoice, keys: dict[str, str]) -> STTService:
    vendor = agent.transcriber or ("openai" if "openai" in keys else "deepgram")
    key = _key(keys, vendor, "speech_provider_not_connected")
    if vendor == "deepgram":
        from voice.deepgram import DeepgramHttpSTTService
        return DeepgramHttpSTTService(api_key=key, base_url=settings.vendor_base_url("deepgram"),
                                      language=agent.language)
    return OpenAISTTService(api_key=key, base_url=settings.vendor_base_url("openai"),
                            settings=OpenAISTTService.Settings(
                                model=OPENAI_TRANSCRIPTION_MODEL,
                                language=_language(agent.language)))


def tts_service(settings: Settings, agent: AgentVoice, keys: dict[str, str],
                http: Any) -> TTSService:
    vendor, voice = speech_vendor_of(agent.voice_id)
    key = _key(keys, vendor, "speech_provider_not_connected")
    base_url = settings.vendor_base_url(vendor)
    if vendor == "elevenlabs":
        return ElevenLabsHttpTTSService(api_key=key, voice_id=voice, aiohttp_session=http,
                                        base_url=base_url)
    if vendor == "cartesia":
        return CartesiaHttpTTSService(api_key=key, voice_id=voice, base_url=base_url)
    if vendor == "deepgram":
        from pipecat.services.deepgram.tts import DeepgramHttpTTSService
        return DeepgramHttpTTSService(api_key=key, voice=voice, aiohttp_session=http,
                                      base_url=base_url)
    # OpenAI speaks 24 kHz PCM; the output resamples it to the line's rate.
    return OpenAITTSService(api_key=key, base_url=base_url, sample_rate=OPENAI_SPEECH_RATE,
                            settings=OpenAITTSService.Settings(
                                model=OPENAI_SPEECH_MODEL, voice=voice,
                                language=_language(agent.language)))
