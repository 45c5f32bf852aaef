"""Silero VAD for many calls in one process: Pipecat's analyzer, with one ONNX session per
process and the analysis run where the frame arrives.

Pipecat's `SileroVADAnalyzer` builds an ONNX session per call (about 9 MiB of RSS and 30 ms of
blocking each) and hands every 20 ms frame to a thread of its own (one per call), which costs
more CPU than the model: measured 320 μs of CPU per frame through the thread against 140 μs run
in place, of which the model is about 100 μs per 32 ms window (bench/RESULTS.md, voice).

`SharedSileroVAD` keeps Pipecat's decisions exactly (its state machine, model-state resets and
parameters; tests/voice/test_silero.py feeds both the same recordings) and changes three things:

- the model's InferenceSession is built once per process and shared; each call keeps its own
  recurrent state and context (`SileroOnnxModel` holds them beside the session). ONNX Runtime's
  `InferenceSession.run` is safe to call from several threads at once;
- a frame is analysed in place on the event loop (100 μs per window: less than the thread
  hand-off it replaces);
- with `min_volume` 0 (the runtime's setting, voice/call.py) the loudness Pipecat computes for
  every window cannot change a decision, so it is not computed.

This module is the seam: the private names of Pipecat's VAD it relies on are checked by name in
tests/voice/test_silero.py, so an upgrade that changes them fails there first.
"""

from __future__ import annotations

import functools
from importlib import resources

import onnxruntime
from pipecat.audio.vad.silero import SileroOnnxModel, SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams, VADState

MODEL = resources.files("pipecat.audio.vad.data").joinpath("silero_vad.onnx")
SAMPLE_RATES = [8000, 16000]


@functools.cache
def shared_session() -> onnxruntime.InferenceSession:
    """The process's one Silero session (built on first use; about 30 ms)."""
    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = 1
    with resources.as_file(MODEL) as path:
        return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"],
                                            sess_options=options)


class SharedSileroModel(SileroOnnxModel):
    """One call's Silero state over the shared session."""

    def __init__(self, session: onnxruntime.InferenceSession) -> None:  # no session of its own
        self.session = session
        self.sample_rates = SAMPLE_RATES
        self.reset_states()  # type: ignore[no-untyped-call]


class SharedSileroVAD(SileroVADAnalyzer):
    def __init__(self, *, params: VADParams) -> None:
        # Pipecat's VADAnalyzer set-up without SileroVADAnalyzer's own model loading.
        VADAnalyzer.__init__(self, params=params)
        self._model = SharedSileroModel(shared_session())
        self._windows_since_reset = 0
        self._low_confidence_windows = 0

    async def analyze_audio(self, buffer: bytes) -> VADState:
        return self._run_analyzer(buffer)

    def _get_smoothed_volume(self, audio: bytes) -> float:
        if self.params.min_volume <= 0:
            return 0.0  # every volume passes `volume >= min_volume`
        return super()._get_smoothed_volume(audio)
