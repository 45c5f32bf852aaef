"""Regenerate the sandbox contact's recordings (integrations/telephony/sandbox_audio/).

Run once by hand when a line changes; the WAVs are committed and nothing at run time needs
espeak-ng or sox (`apt-get install espeak-ng sox`). Every clip is mono 16-bit PCM at 8 kHz with
under 50 ms of leading and trailing silence, so a clip's length is its speech.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "integrations" / "telephony" / "sandbox_audio"
RATE = 8000
VOICE = "en-us"
WORDS_PER_MINUTE = "165"
KEEP_EDGE = int(0.02 * RATE)
PAUSE = np.zeros(int(0.3 * RATE), dtype=np.int16)

SPOKEN: dict[str, str] = {
    "hello": "Hello?",
    "minute": "Yes, I have a minute.",
    "sounds_good": "That sounds good.",
    "goodbye": "Thank you, goodbye.",
    "voicemail_greeting": "Hi, you have reached Sam. Please leave a message after the tone.",
}
# The talkative contact's lines: two halves joined by a 300 ms pause inside the recording.
TALKATIVE: dict[str, tuple[str, str]] = {
    "talk_1": (
        "I have been meaning to look into this for a while,",
        "and I would like to hear all the details before I decide.",
    ),
    "talk_2": (
        "The price matters a great deal to me this year,",
        "so please tell me exactly what it would cost each month.",
    ),
    "talk_3": (
        "That all sounds fine to me and I will think it over,",
        "so thank you for calling, goodbye.",
    ),
}


def speak(text: str) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        raw, resampled = Path(tmp, "raw.wav"), Path(tmp, "8k.wav")
        subprocess.run(
            ["espeak-ng", "-v", VOICE, "-s", WORDS_PER_MINUTE, "-w", str(raw), text], check=True
        )
        subprocess.run(
            ["sox", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(resampled)], check=True
        )
        with wave.open(str(resampled), "rb") as wav:
            pcm = np.frombuffer(wav.readframes(wav.getnframes()), dtype=np.int16)
    return trim(pcm)


def trim(pcm: np.ndarray, threshold: int = 300) -> np.ndarray:
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > threshold)
    if loud.size == 0:
        return pcm[:0]
    start = max(int(loud[0]) - KEEP_EDGE, 0)
    end = min(int(loud[-1]) + 1 + KEEP_EDGE, pcm.size)
    return pcm[start:end]


def beep(hz: float = 1000.0, seconds: float = 0.4) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    ramp = np.minimum(1.0, np.minimum(t, seconds - t) / 0.005)  # 5 ms fades: no clicks
    return (np.sin(2 * np.pi * hz * t) * ramp * 0.5 * 32767).astype(np.int16)


def write(name: str, pcm: np.ndarray) -> str:
    file = f"{name}.wav"
    with wave.open(str(OUT / file), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes(pcm.astype("<i2").tobytes())
    return file


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    clips = []
    for name, text in SPOKEN.items():
        clips.append({"name": name, "file": write(name, speak(text)), "text": text})
    clips.append({"name": "beep", "file": write("beep", beep()), "text": ""})
    for name, (first, second) in TALKATIVE.items():
        pcm = np.concatenate([speak(first), PAUSE, speak(second)])
        clips.append({"name": name, "file": write(name, pcm), "text": f"{first} {second}"})
    (OUT / "manifest.json").write_text(json.dumps({"clips": clips}, indent=2) + "\n")


if __name__ == "__main__":
    main()
