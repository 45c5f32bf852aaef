"""The agent's vendors as Pipecat services: its LLM, transcriber and voice, at the base URLs of
the settings and with the sub-account's own keys (CONTRACT 6, 9), over HTTP connections the
process's calls share (`VendorClients`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from http.cookiejar import Cookie, CookieJar
from typing import Any

import aiohttp
import anthropic
import httpx2
import openai
from anthropic import AsyncAnthropic
from google.genai.types import HttpOptions
from pipecat.frames.frames import FunctionCallFromLLM
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
from tenancy.storable import storable
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
# An idle connection to a vendor stays open this long for the process's next request (below the
# idle timeouts of the vendors' own front ends, so it is not closed under a request).
KEEPALIVE_SECONDS = 30.0
MAX_CONNECTIONS = 1000


class _NoCookies(CookieJar):
    """A cookie jar that keeps nothing: a vendor's cookie is never sent again."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None

    def set_cookie(self, cookie: Cookie) -> None:
        return None


class VendorClients:
    """One voice process's HTTP clients to the vendors, shared by all its calls: a call's first
    request to a vendor goes out on a connection an earlier call left open, instead of a new
    TCP (and, with the real vendors, TLS) handshake in its first turn. Nothing of a sub-account
    stays in them: its key travels in each request's own headers (from the SDK client or
    service made for its call), and a cookie a vendor sets is never kept. Made on first use, on
    the running loop; `aclose` when the runtime stops."""

    def __init__(self) -> None:
        self._http: httpx2.AsyncClient | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def http(self) -> httpx2.AsyncClient:
        """For the OpenAI-format and Anthropic SDKs and Deepgram's transcription."""
        if self._http is None or self._http.is_closed:
            self._http = httpx2.AsyncClient(
                timeout=VENDOR_TIMEOUT,
                limits=httpx2.Limits(
                    max_connections=MAX_CONNECTIONS,
                    max_keepalive_connections=100,
                    keepalive_expiry=KEEPALIVE_SECONDS,
                ),
                cookies=_NoCookies(),
                follow_redirects=True,
            )
        return self._http

    @property
    def session(self) -> aiohttp.ClientSession:
        """For the aiohttp-based speech services and Google's SDK, with the same bound on a
        read."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=VENDOR_CONNECT_SECONDS, sock_read=VENDOR_READ_SECONDS
                ),
                connector=aiohttp.TCPConnector(
                    limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_SECONDS
                ),
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._session is not None:
            await self._session.close()


class _Bounded:
    """An OpenAI-compatible LLM service whose client waits VENDOR_TIMEOUT at most, once, over
    the process's shared connections (`http`, set before Pipecat makes its client)."""

    http: httpx2.AsyncClient

    def __init__(self, *, http: httpx2.AsyncClient, **kwargs: Any) -> None:
        self.http = http
        super().__init__(**kwargs)

    def create_client(
        self,
        api_key: Any = None,
        base_url: Any = None,
        organization: Any = None,
        project: Any = None,
        default_headers: Any = None,
        **_: Any,
    ) -> Any:
        return openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            organization=organization,
            project=project,
            default_headers=default_headers,
            http_client=self.http,
            timeout=VENDOR_TIMEOUT,
            max_retries=0,
        )


class _StorableArguments:
    """An LLM service whose function calls carry the model's arguments cleaned (CONTRACT 18a):
    a NUL, lone surrogate or NaN the model sent reaches neither a tool nor the call's record,
    nor the model's next request (its SDK cannot encode a lone surrogate)."""

    async def run_function_calls(self, function_calls: Sequence[FunctionCallFromLLM]) -> None:
        cleaned = [replace(call, arguments=storable(call.arguments)) for call in function_calls]
        await super().run_function_calls(cleaned)  # type: ignore[misc]


class _OpenAILLM(_StorableArguments, _Bounded, OpenAILLMService):
    pass


class _DeepSeekLLM(_StorableArguments, _Bounded, DeepSeekLLMService):
    pass


class _GrokLLM(_StorableArguments, _Bounded, GrokLLMService):
    pass


class _AnthropicLLM(_StorableArguments, AnthropicLLMService):
    pass


class _GoogleLLM(_StorableArguments, GoogleLLMService):
    pass


class _OpenAISTT(OpenAISTTService):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        without_retries(self)


class _OpenAITTS(OpenAITTSService):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        without_retries(self)


class VendorMissing(Exception):
    """The agent needs a vendor the sub-account has not connected; the message is the error."""


def _key(keys: dict[str, str], vendor: str, error: str) -> str:
    key = keys.get(vendor)
    if not key:
        raise VendorMissing(error)
    return key


def llm_service(
    settings: Settings, agent: AgentConfig, keys: dict[str, str], clients: VendorClients
) -> Any:
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
        client = AsyncAnthropic(
            api_key=key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=clients.http,
        )
        return _AnthropicLLM(api_key=key, settings=anthropic_settings, client=client)
    if vendor == "google":
        google_settings = GoogleLLMService.Settings(
            model=agent.llm_model, temperature=agent.temperature, system_instruction=prompt
        )
        return _GoogleLLM(
            api_key=key,
            settings=google_settings,
            http_options=HttpOptions(
                base_url=base_url,
                timeout=int(VENDOR_READ_SECONDS * 1000),
                aiohttp_client=clients.session,
            ),
        )
    kind: Any = {"deepseek": _DeepSeekLLM, "grok": _GrokLLM}.get(vendor, _OpenAILLM)
    return kind(
        http=clients.http,
        api_key=key,
        base_url=base_url,
        settings=kind.Settings(
            model=agent.llm_model, temperature=agent.temperature, system_instruction=prompt
        ),
    )


def stt_service(
    settings: Settings, agent: AgentConfig, keys: dict[str, str], clients: VendorClients
) -> STTService:
    vendor = agent.transcriber or ("openai" if "openai" in keys else "deepgram")
    key = _key(keys, vendor, "speech_provider_not_connected")
    if vendor == "deepgram":
        from voice.deepgram import DeepgramHttpSTTService

        return DeepgramHttpSTTService(
            api_key=key,
            http=clients.http,
            base_url=settings.vendor_base_url("deepgram"),
            language=deepgram_language(agent.language),
        )
    return _OpenAISTT(
        api_key=key,
        http_client=clients.http,
        base_url=settings.vendor_base_url("openai"),
        settings=OpenAISTTService.Settings(
            model=OPENAI_TRANSCRIPTION_MODEL, language=iso_639_1(agent.language)
        ),
    )


def tts_service(
    settings: Settings, agent: AgentConfig, keys: dict[str, str], clients: VendorClients
) -> TTSService:
    vendor, voice = speech_vendor_of(agent.voice_id)
    http = clients.session
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
        http_client=clients.http,
        base_url=base_url,
        sample_rate=OPENAI_SPEECH_RATE,
        settings=OpenAITTSService.Settings(
            model=OPENAI_SPEECH_MODEL, voice=voice, language=language
        ),
    )
