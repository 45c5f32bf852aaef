"""The one place that reaches into Pipecat below its public API.

The runtime needs a few names Pipecat keeps private: the WebSocket output's audio pacing and the
WebSocket transport's construction of its output (voice/transport.py), the Silero analyzer's
state and model (voice/silero.py), and the OpenAI speech services' client (voice/vendors.py).
They are named here and nowhere else, behind base classes and small functions with names of our
own; tests/voice/test_pipecat_seam.py names each one and fails with the class and attribute
when an upgrade moves it, and pyproject.toml pins the Pipecat it was checked against.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from importlib.abc import Traversable

import onnxruntime
from pipecat.audio.vad.silero import SileroOnnxModel, SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams, VADState
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.services.whisper.base_stt import BaseWhisperSTTService
from pipecat.transports.websocket.fastapi import (
    FastAPIWebsocketOutputTransport,
    FastAPIWebsocketParams,
    FastAPIWebsocketTransport,
)
from starlette.websockets import WebSocket

# The Silero model file Pipecat ships (its SileroVADAnalyzer loads it from there).
SILERO_MODEL: Traversable = resources.files("pipecat.audio.vad.data").joinpath("silero_vad.onnx")
SILERO_SAMPLE_RATES = [8000, 16000]


class PacedWebsocketOutput(FastAPIWebsocketOutputTransport):
    """Pipecat's WebSocket output with the wait after each audio chunk decided by `audio_wait`
    instead of its real-time clock (`_write_audio_sleep`). The playout moment it is given is
    Pipecat's `_next_send_time`: 0 at first and after an interruption."""

    def audio_wait(self, playout: float, chunk_seconds: float) -> tuple[float, float]:
        """After a chunk of `chunk_seconds` was sent: how long to wait before the next, and the
        new playout moment."""
        raise NotImplementedError

    async def _write_audio_sleep(self) -> None:
        wait, playout = self.audio_wait(self._next_send_time, self._send_interval)
        self._next_send_time = playout  # type: ignore[assignment]  # Pipecat's is an int 0 at first
        await asyncio.sleep(wait)


class WebsocketTransport(FastAPIWebsocketTransport):
    """Pipecat's FastAPI WebSocket transport, its output an `output_class` (Pipecat builds its
    own output in __init__ from its private client, params and output name)."""

    output_class: type[FastAPIWebsocketOutputTransport] = FastAPIWebsocketOutputTransport

    def __init__(self, websocket: WebSocket, params: FastAPIWebsocketParams) -> None:
        super().__init__(websocket=websocket, params=params)
        self._output = self.output_class(self, self._client, self._params, name=self._output_name)


class SileroModelOverSession(SileroOnnxModel):
    """One analyzer's Silero state (its recurrent state and context) over an ONNX session it is
    given, instead of a session of its own loaded from the model file."""

    def __init__(self, session: onnxruntime.InferenceSession) -> None:
        self.session = session
        self.sample_rates = SILERO_SAMPLE_RATES
        self.reset_states()  # type: ignore[no-untyped-call]


class SileroOverModel(SileroVADAnalyzer):
    """Pipecat's Silero analyzer (its state machine, model-state resets and parameters) over a
    model it is given, without loading one of its own; `analyze_in_place` runs Pipecat's
    analysis of a buffer where it is called instead of in the analyzer's thread, and with
    `min_volume` 0 the loudness, which cannot then change a decision, is not computed."""

    def __init__(self, *, params: VADParams, model: SileroOnnxModel) -> None:
        VADAnalyzer.__init__(self, params=params)
        self._model = model
        self._windows_since_reset = 0
        self._low_confidence_windows = 0

    @property
    def silero_model(self) -> SileroOnnxModel:
        return self._model

    def analyze_in_place(self, buffer: bytes) -> VADState:
        return self._run_analyzer(buffer)

    def _get_smoothed_volume(self, audio: bytes) -> float:
        if self.params.min_volume <= 0:
            return 0.0  # every volume passes `volume >= min_volume`
        return super()._get_smoothed_volume(audio)


def without_retries(service: BaseWhisperSTTService | OpenAITTSService) -> None:
    """The OpenAI client an OpenAI transcription or speech service made for itself (Pipecat's
    `_client`) made not to retry: a live call never waits through a second attempt."""
    service._client = service._client.with_options(max_retries=0)
