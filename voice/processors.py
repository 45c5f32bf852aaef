"""The call's own Pipecat processors: what an agent field does that Pipecat has no stage for.

- FirstMessage: the agent's first_message, spoken in place of the model's first reply;
- Backchannel: "Mm-hmm." in the contact's pauses while they speak at length (backcchanneling);
- VoicemailMessage: the voicemail_message, left once the machine's greeting and beep are over.

The two that listen read the line's loudness from the input frames (40 ms each,
voice/transport.py): a frame is sound when its RMS is above SOUND_DBFS (a phone line's hiss is
well below it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

import numpy as np
from pipecat.frames.frames import (
    BotBackchannelFrame,
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InputAudioRawFrame,
    LLMContextFrame,
    TTSSpeakFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

SOUND_DBFS = -40.0


def is_sound(audio: bytes) -> bool:
    samples = np.frombuffer(audio, dtype="<i2").astype(np.float64)
    if samples.size == 0:
        return False
    rms = math.sqrt(float(np.mean(samples * samples)))
    return rms > 32768 * 10 ** (SOUND_DBFS / 20)


class FirstMessage(FrameProcessor):
    """Speaks the agent's first_message in place of the model's first reply."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text: str | None = text

    def take(self) -> str | None:
        """The first message if it has not been said (and it will not be, by this stage)."""
        text, self._text = self._text, None
        return text

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if self._text is not None and isinstance(frame, LLMContextFrame):
            await self.push_frame(TTSSpeakFrame(self.take() or ""), direction)
            return
        await self.push_frame(frame, direction)


class AfterHangUp(FrameProcessor):
    """Asks the model nothing once the contact has hung up: a reply nobody would hear."""

    def __init__(self, hung_up: Callable[[], bool]) -> None:
        super().__init__()
        self._hung_up = hung_up

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame) and self._hung_up():
            return
        await self.push_frame(frame, direction)


class Backchannel(FrameProcessor):
    """A short acknowledgement in a pause of the contact's long turn, never over the agent.

    The contact has spoken for at least `after_seconds` of this turn (pauses shorter than the
    turn's end included), then pauses for `pause_seconds`: the agent says "Mm-hmm." (not added
    to the model's context; the contact is not interrupted). At most one per `gap_seconds`.
    """

    PHRASES = ("Mm-hmm.", "I see.", "Right.")

    def __init__(
        self,
        turn_end_seconds: float,
        after_seconds: float = 1.5,
        pause_seconds: float = 0.2,
        gap_seconds: float = 4.0,
        said: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self._turn_end = turn_end_seconds
        self._after = after_seconds
        self._pause = min(pause_seconds, turn_end_seconds / 2)
        self._gap = gap_seconds
        self._said = said
        self._bot_speaking = False
        self._speech_started: float | None = None
        self._last_sound = 0.0
        self._last_backchannel = -math.inf
        self._count = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
        elif isinstance(frame, InputAudioRawFrame):
            await self._listen(frame.audio)
        await self.push_frame(frame, direction)

    async def _listen(self, audio: bytes) -> None:
        now = time.monotonic()
        if is_sound(audio):
            if self._speech_started is None or now - self._last_sound > self._turn_end:
                self._speech_started = now  # a new turn
            self._last_sound = now
            return
        if self._speech_started is None or self._bot_speaking:
            return
        quiet = now - self._last_sound
        spoken = self._last_sound - self._speech_started
        if (
            self._pause <= quiet < self._turn_end
            and spoken >= self._after
            and now - self._last_backchannel >= self._gap
        ):
            self._last_backchannel = now
            self._speech_started = None
            phrase = self.PHRASES[self._count % len(self.PHRASES)]
            self._count += 1
            if self._said is not None:
                self._said(phrase)
            await self.push_frame(BotBackchannelFrame(phrase), FrameDirection.DOWNSTREAM)


class VoicemailMessage(FrameProcessor):
    """Leaves the agent's voicemail_message after the machine's greeting and beep, then ends.

    The message starts once the line has been quiet for `quiet_seconds` after sound (the beep
    is the last sound a machine makes before it records), or after `give_up_seconds` of a line
    that never made a sound. `spoken` is told once the message is on its way (it ends the call:
    an EndFrame queued after the message lets the output play it to its end).
    """

    def __init__(
        self,
        message: str,
        spoken: Callable[[str], Awaitable[None]],
        quiet_seconds: float = 1.0,
        give_up_seconds: float = 10.0,
    ) -> None:
        super().__init__()
        self._message = message
        self._spoken = spoken
        self._quiet = quiet_seconds
        self._give_up = give_up_seconds
        self._started = time.monotonic()
        self._heard_sound = False
        self._last_sound = self._started
        self._left = False

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame) and not self._left:
            now = time.monotonic()
            if is_sound(frame.audio):
                self._heard_sound, self._last_sound = True, now
            elif (
                self._heard_sound and now - self._last_sound >= self._quiet
            ) or now - self._started >= self._give_up:
                self._left = True
                await self.push_frame(TTSSpeakFrame(self._message), FrameDirection.DOWNSTREAM)
                await self._spoken(self._message)
        await self.push_frame(frame, direction)
