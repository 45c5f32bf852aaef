"""Deepgram's prerecorded HTTP transcription (`POST /v1/listen`) on each finished turn, as
CONTRACT 9 has speech vendors used over HTTP; Pipecat's own Deepgram service is WebSocket-only."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import httpx2
from pipecat.frames.frames import ErrorFrame, Frame, TranscriptionFrame
from pipecat.services.stt_service import SegmentedSTTService
from pipecat.utils.time import time_now_iso8601


class DeepgramHttpSTTService(SegmentedSTTService):
    def __init__(
        self,
        *,
        api_key: str,
        http: httpx2.AsyncClient,
        base_url: str,
        language: str,
        model: str = "nova-3",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._http = http
        self._api_key = api_key
        self._url = f"{base_url.rstrip('/')}/v1/listen"
        self._query = {"model": model, "language": language, "smart_format": "true"}

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame, None]:
        try:
            answer = await self._http.post(
                self._url,
                params=self._query,
                content=audio,
                headers={"Authorization": f"Token {self._api_key}", "Content-Type": "audio/wav"},
            )
            answer.raise_for_status()
            alternatives = answer.json()["results"]["channels"][0]["alternatives"]
            text = str(alternatives[0]["transcript"]).strip() if alternatives else ""
        except (httpx2.HTTPError, KeyError, IndexError, ValueError) as exc:
            yield ErrorFrame(error=f"speech_error: deepgram transcription failed: {exc}")
            return
        if text:
            yield TranscriptionFrame(text, "", time_now_iso8601())
