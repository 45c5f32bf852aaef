"""Regenerate the agent's background ambience beds (voice/ambience/*.wav).

Run by hand when a bed changes; the WAVs are committed. Each is 8 s of mono 16-bit PCM at
8 kHz (the runtime's output rate, the telephone's), looped under the agent's voice by Pipecat's
SoundfileMixer, about -30 dBFS RMS: heard, never louder than the voice. Synthesised (no
recordings with licences to track): shaped noise with the events that make each room
recognisable.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "voice" / "ambience"
RATE = 8000
SECONDS = 8
TARGET_DBFS = -30.0


def coloured_noise(rng: np.random.Generator, exponent: float) -> np.ndarray:
    """Noise whose power falls as 1/f**exponent (1: pink, 2: brown)."""
    spectrum = np.fft.rfft(rng.standard_normal(RATE * SECONDS))
    freqs = np.fft.rfftfreq(RATE * SECONDS, 1 / RATE)
    freqs[0] = freqs[1]
    return np.fft.irfft(spectrum / freqs ** (exponent / 2), n=RATE * SECONDS)


def clicks(rng: np.random.Generator, per_second: float, length_ms: float) -> np.ndarray:
    out = np.zeros(RATE * SECONDS)
    size = int(RATE * length_ms / 1000)
    decay = np.exp(-np.linspace(0, 6, size))
    for start in rng.integers(0, out.size - size, int(per_second * SECONDS)):
        out[start : start + size] += rng.standard_normal(size) * decay * rng.uniform(0.3, 1.0)
    return out


def babble(rng: np.random.Generator, voices: int) -> np.ndarray:
    """Distant talkers: band-limited noise under slow syllable-rate envelopes."""
    t = np.arange(RATE * SECONDS) / RATE
    total = np.zeros_like(t)
    for _ in range(voices):
        pitch = rng.uniform(100, 220)
        voiced = np.sign(np.sin(2 * np.pi * pitch * t)) * 0.3 + coloured_noise(rng, 1.0) * 0.7
        syllables = np.clip(np.sin(2 * np.pi * rng.uniform(3, 5) * t + rng.uniform(0, 6)), 0, None)
        phrase_rate = rng.uniform(0.15, 0.3)
        phrases = np.clip(np.sin(2 * np.pi * phrase_rate * t + rng.uniform(0, 6)), 0, None)
        total += voiced * syllables * phrases
    return total


def level(signal: np.ndarray) -> np.ndarray:
    signal = signal - signal.mean()
    rms = np.sqrt(np.mean(signal**2))
    scaled = signal / rms * 32768 * 10 ** (TARGET_DBFS / 20)
    # Fade the loop's seam so it does not click.
    fade = int(0.05 * RATE)
    ramp = np.linspace(0, 1, fade)
    scaled[:fade] *= ramp
    scaled[-fade:] *= ramp[::-1]
    return np.clip(scaled, -32768, 32767).astype("<i2")


def main() -> None:
    rng = np.random.default_rng(20261124)
    beds = {
        "office": coloured_noise(rng, 1.0) * 0.6 + clicks(rng, 6, 15) * 2.0,
        "cafe": coloured_noise(rng, 2.0) * 0.5 + babble(rng, 4) * 0.6 + clicks(rng, 1.5, 60),
        "call_center": babble(rng, 8) + coloured_noise(rng, 1.0) * 0.3,
    }
    OUT.mkdir(exist_ok=True)
    for name, signal in beds.items():
        with wave.open(str(OUT / f"{name}.wav"), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(RATE)
            out.writeframes(level(signal).tobytes())
        print(name, OUT / f"{name}.wav")


if __name__ == "__main__":
    main()
