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

What of Pipecat's VAD this takes apart is private: it is reached through voice/pipecat_seam.py.
"""

from __future__ import annotations

import functools
from importlib import resources

import onnxruntime
from pipecat.audio.vad.vad_analyzer import VADParams, VADState

from voice.pipecat_seam import SILERO_MODEL, SileroModelOverSession, SileroOverModel


@functools.cache
def shared_session() -> onnxruntime.InferenceSession:
    """The process's one Silero session (built on first use; about 30 ms)."""
    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = 1
    with resources.as_file(SILERO_MODEL) as path:
        return onnxruntime.InferenceSession(
            str(path), providers=["CPUExecutionProvider"], sess_options=options
        )


class SharedSileroVAD(SileroOverModel):
    """One call's Silero analyzer: its own state over the process's session, analysed in place."""

    def __init__(self, *, params: VADParams) -> None:
        super().__init__(params=params, model=SileroModelOverSession(shared_session()))

    async def analyze_audio(self, buffer: bytes) -> VADState:
        return self.analyze_in_place(buffer)
