"""voice/silero.py: the runtime's VAD decides exactly as Pipecat's SileroVADAnalyzer on the same
audio, with one ONNX session for every call of the process (the private names of Pipecat's VAD it
relies on are checked in tests/voice/test_pipecat_seam.py)."""

from __future__ import annotations

import pytest
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams, VADState

from integrations.telephony import mulaw
from integrations.telephony.sandbox_audio import SAMPLE_RATE, load_clip
from voice.silero import SharedSileroVAD

FRAME = 320  # 20 ms of 16-bit samples at 8 kHz, as a Media Streams message carries
CLIPS = ("hello", "minute", "sounds_good", "goodbye", "talk_1")


def line(*names: str) -> bytes:
    """The clips as the contact says them on the phone: silence around each, through μ-law."""
    pause = bytes(SAMPLE_RATE)  # 0.5 s
    pcm = b"".join(pause + load_clip(name) for name in names) + bytes(SAMPLE_RATE * 4)
    return mulaw.decode(mulaw.encode(pcm[: len(pcm) // FRAME * FRAME]))


async def states(analyzer: VADAnalyzer, pcm: bytes) -> list[VADState]:
    analyzer.set_sample_rate(SAMPLE_RATE)
    return [await analyzer.analyze_audio(pcm[at : at + FRAME]) for at in range(0, len(pcm), FRAME)]


@pytest.mark.parametrize("min_volume", [0.0, 0.6])
async def test_decides_as_pipecats_analyzer_on_the_same_audio(min_volume: float) -> None:
    pcm = line(*CLIPS)
    params = VADParams(stop_secs=0.3, min_volume=min_volume)

    theirs = await states(SileroVADAnalyzer(params=params), pcm)
    ours = await states(SharedSileroVAD(params=params), pcm)

    assert ours == theirs
    turns = sum(
        1
        for before, now in zip(ours, ours[1:], strict=False)
        if before == VADState.STOPPING and now == VADState.QUIET
    )
    assert turns >= len(CLIPS)  # every clip's speech started and ended a turn


async def test_calls_sharing_the_session_keep_their_own_state() -> None:
    params = VADParams(stop_secs=0.3, min_volume=0.0)
    talking, quiet = line("minute", "talk_1"), bytes(len(line("minute", "talk_1")))
    alone = await states(SharedSileroVAD(params=params), talking)

    first, second = SharedSileroVAD(params=params), SharedSileroVAD(params=params)
    first.set_sample_rate(SAMPLE_RATE)
    second.set_sample_rate(SAMPLE_RATE)
    together = []
    for at in range(0, len(talking), FRAME):  # the two calls' frames interleaved
        together.append(await first.analyze_audio(talking[at : at + FRAME]))
        assert await second.analyze_audio(quiet[at : at + FRAME]) == VADState.QUIET

    assert together == alone
    assert first.silero_model.session is second.silero_model.session  # one ONNX session per process
