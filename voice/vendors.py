"""The agent's vendors as Pipecat services: its LLM, transcriber and voice, at the base URLs of
the settings and with the sub-account's own keys (CONTRACT 6, 9)."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import openai
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

from api.agents.schemas import PROVIDER_OF_MODEL
from api.agents.voices import speech_vendor_of
from tenancy.settings import Settings
from voice.agent import AgentConfig
from voice.languages import deepgram_language, iso_639_1
from voice.pipecat_seam import without_retries

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
# A vendor that stops answering ends the call (llm_error, speech_error) instead of holding the
# line until max_duration: no read from a vendor waits longer than this, and a live call does not
# retry (the contact would be waiting through each attempt).
VENDOR_READ_SECONDS = 15.0
VENDOR_CONNECT_SECONDS = 5.0
VENDOR_TIMEOUT = openai.Timeout(VENDOR_READ_SECONDS, connect=VENDOR_CONNECT_SECONDS)


def vendor_session() -> aiohttp.ClientSession:
    """The HTTP session of a call's aiohttp-based vendors, with the same bound on a read."""
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=VENDOR_CONNECT_SECONDS, sock_read=VENDOR_READ_SECONDS
        )
    )


def _openai_http() -> openai.DefaultAsyncHttpxClient:
    return openai.DefaultAsyncHttpxClient(timeout=VENDOR_TIMEOUT)


class _Bounded:
    """An OpenAI-compatible LLM service whose client waits VENDOR_TIMEOUT at most, once."""

    def create_client(self, *args: Any, **kwargs: Any) -> Any:
        client = super().create_client(*args, **kwargs)  # type: ignore[misc]
        return client.with_options(timeout=VENDOR_TIMEOUT, max_retries=0)


class _OpenAILLM(_Bounded, OpenAILLMService):
    pass


class _DeepSeekLLM(_Bounded, DeepSeekLLMService):
    pass


class _GrokLLM(_Bounded, GrokLLMService):
    pass


class _OpenAISTT(OpenAISTTService):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(http_client=_openai_http(), **kwargs)
        without_retries(self)


class _OpenAITTS(OpenAITTSService):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(http_client=_openai_http(), **kwargs)
        without_retries(self)


class VendorMissing(Exception):
    """The agent needs a vendor the sub-account has not connected; the message is the error."""


def _key(keys: dict[str, str], vendor: str, error: str) -> str:
    key = keys.get(vendor)
    if not key:
        raise VendorMissing(error)
    return key


def llm_service(settings: Settings, agent: AgentConfig, keys: dict[str, str]) -> Any:
    vendor = PROVIDER_OF_MODEL.get(agent.llm_model, "openai")
    key = _key(keys, vendor, f"llm_error: the {vendor} integration is not connected")
    base_url = settings.vendor_base_url(vendor)
    prompt = agent.instructions
    if vendor == "anthropic":
        anthropic_settings = AnthropicLLMService.Settings(
            model=ANTHROPIC_NAMES.get(agent.llm_model, agent.llm_model),
            temperature=agent.temperature,
            system_instruction=prompt,
        )
        timeout = anthropic.Timeout(VENDOR_READ_SECONDS, connect=VENDOR_CONNECT_SECONDS)
        client = AsyncAnthropic(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)
        return AnthropicLLMService(api_key=key, settings=anthropic_settings, client=client)
    if vendor == "google":
        google_settings = GoogleLLMService.Settings(
            model=agent.llm_model, temperature=agent.temperature, system_instruction=prompt
        )
        return GoogleLLMService(
            api_key=key,
            settings=google_settings,
            http_options=HttpOptions(base_url=base_url, timeout=int(VENDOR_READ_SECONDS * 1000)),
        )
    kind: Any = {"deepseek": _DeepSeekLLM, "grok": _GrokLLM}.get(vendor, _OpenAILLM)
    return kind(
        api_key=key,
        base_url=base_url,
        settings=kind.Settings(
            model=agent.llm_model, temperature=agent.temperature, system_instruction=prompt
        ),
    )


def stt_service(settings: Settings, agent: AgentConfig, keys: dict[str, str]) -> STTService:
    vendor = agent.transcriber or ("openai" if "openai" in keys else "deepgram")
    key = _key(keys, vendor, "speech_provider_not_connected")
    if vendor == "deepgram":
        from voice.deepgram import DeepgramHttpSTTService

        return DeepgramHttpSTTService(
            api_key=key,
            base_url=settings.vendor_base_url("deepgram"),
            language=deepgram_language(agent.language),
        )
    return _OpenAISTT(
        api_key=key,
        base_url=settings.vendor_base_url("openai"),
        settings=OpenAISTTService.Settings(
            model=OPENAI_TRANSCRIPTION_MODEL, language=iso_639_1(agent.language)
        ),
    )


def tts_service(
    settings: Settings, agent: AgentConfig, keys: dict[str, str], http: Any
) -> TTSService:
    vendor, voice = speech_vendor_of(agent.voice_id)
    key = _key(keys, vendor, "speech_provider_not_connected")
    base_url = settings.vendor_base_url(vendor)
    # ElevenLabs (`language_code`, for the models that take one) and Cartesia (`language`) are
    # asked in the agent's language. OpenAI's speech takes none (it speaks the text as written;
    # the setting only decides how replies split into sentences), nor does Deepgram's Aura (the
    # voice's model names its language: aura-2-<voice>-<language>).
    language = iso_639_1(agent.language)
    if vendor == "elevenlabs":
        return ElevenLabsHttpTTSService(
            api_key=key,
            aiohttp_session=http,
            base_url=base_url,
            settings=ElevenLabsHttpTTSService.Settings(voice=voice, language=language),
        )
    if vendor == "cartesia":
        return CartesiaHttpTTSService(
            api_key=key,
            base_url=base_url,
            aiohttp_session=http,
            settings=CartesiaHttpTTSService.Settings(voice=voice, language=language),
        )
    if vendor == "deepgram":
        from pipecat.services.deepgram.tts import DeepgramHttpTTSService

        return DeepgramHttpTTSService(
            api_key=key, voice=voice, aiohttp_session=http, base_url=base_url
        )
    # OpenAI speaks 24 kHz PCM; the output resamples it to the line's rate.
    return _OpenAITTS(
        api_key=key,
        base_url=base_url,
        sample_rate=OPENAI_SPEECH_RATE,
        settings=OpenAITTSService.Settings(
            model=OPENAI_SPEECH_MODEL, voice=voice, language=language
        ),
    )
