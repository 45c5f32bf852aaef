"""The sandbox contact's bundled recordings: mono 16-bit PCM at 8 kHz, listed in manifest.json.

`scripts/make_sandbox_audio.py` made them; the fake transcription server reads the same manifest
to tell which clip it heard, so a clip's `text` is exactly what it says.
"""

from __future__ import annotations

import json
import wave
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SAMPLE_RATE = 8000
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Clip:
    name: str
    file: str
    text: str


def read_manifest(path: Path = HERE / "manifest.json") -> dict[str, Clip]:
    """The manifest's clips by name, in its order."""
    clips = json.loads(path.read_text())["clips"]
    return {c["name"]: Clip(name=c["name"], file=c["file"], text=c["text"]) for c in clips}


CLIPS = read_manifest()


@cache
def load_clip(name: str) -> bytes:
    """A clip's samples: 16-bit little-endian PCM, mono, 8 kHz."""
    with wave.open(str(HERE / CLIPS[name].file), "rb") as wav:
        if (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) != (1, 2, SAMPLE_RATE):
            raise ValueError(f"{name}: not mono 16-bit PCM at {SAMPLE_RATE} Hz")
        return wav.readframes(wav.getnframes())


def clip_seconds(name: str) -> float:
    return len(load_clip(name)) / (2 * SAMPLE_RATE)
