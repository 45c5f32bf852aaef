"""voice/silero.py: the runtime's VAD decides exactly as Pipecat's SileroVADAnalyzer on the same
audio, with one ONNX session for every call of the process; and the private names of Pipecat's VAD
it relies on are still there."""

from __future__ import annotations

import inspect

import pytest
from pipecat.audio.vad.silero import SileroOnnxModel, SileroVADAnalyzer
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
    return [await analyzer.analyze_audio(pcm[at:at + FRAME]) for at in range(0, len(pcm), FRAME)]


@pytest.mark.parametrize("min_volume", [0.0, 0.6])
async def test_decides_as_pipecats_analyzer_on_the_same_audio(min_volume: float) -> None:
    pcm = line(*CLIPS)
    params = VADParams(stop_secs=0.3, min_volume=min_volume)

    theirs = await states(SileroVADAnalyzer(params=params), pcm)
    ours = await states(SharedSileroVAD(params=params), pcm)

    assert ours == theirs
    turns = sum(1 for before, now in zip(ours, ours[1:], strict=False)
                if before == VADState.STOPPING and now == VADState.QUIET)
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
        together.append(await first.analyze_audio(talking[at:at + FRAME]))
        assert await second.analyze_audio(quiet[at:at + FRAME]) == VADState.QUIET

    assert together == alone
    assert first._model.session is second._model.session  # one ONNX session per process


def test_the_pipecat_names_the_seam_relies_on() -> None:
    """voice/silero.py builds SileroVADAnalyzer's state itself and replaces two of its steps."""

    def assigned(function: object) -> set[str]:
        source = inspect.getsource(function)  # type: ignore[arg-type]
        return {name for name in ("_model", "_windows_since_reset", "_low_confidence_windows",
                                  "session", "sample_rates") if f"self.{name} =" in source}

    assert assigned(SileroVADAnalyzer.__init__) == {
        "_model", "_windows_since_reset", "_low_confidence_windows"}, (
        "SileroVADAnalyzer.__init__ sets other state now: adapt SharedSileroVAD.__init__")
    assert assigned(SileroOnnxModel.__init__) == {"session", "sample_rates"}, (
        "SileroOnnxModel.__init__ sets other state now: adapt SharedSileroModel.__init__")
    for owner, name in ((VADAnalyzer, "_run_analyzer"), (VADAnalyzer, "_get_smoothed_volume"),
                        (SileroOnnxModel, "reset_states")):
        assert callable(getattr(owner, name, None)), f"Pipecat's {owner.__name__}.{name} is gone"
    assert "self._get_smoothed_volume(" in inspect.getsource(VADAnalyzer._run_analyzer)
    assert "self._executor" in inspect.getsource(VADAnalyzer.analyze_audio), (
        "Pipecat's analyze_audio no longer hands frames to a thread: SharedSileroVAD's in-place "
        "analysis may be unneeded")
