"""Audio for the fake vendors: speech-like synthesis, G.711 and WAV, and phrase recognition."""

from __future__ import annotations

import hashlib
import io
import json
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

Samples = npt.NDArray[np.float64]

MS_PER_CHARACTER = 55
MIN_SPEECH_MS = 200
# Envelopes are compared at telephone bandwidth, whatever rate the audio arrives at.
ANALYSIS_RATE = 8000
FRAME = ANALYSIS_RATE // 100
SILENCE_DB = -55.0
DYNAMIC_RANGE_DB = 40.0
MATCH_THRESHOLD = 0.7


def synthesize(text: str, sample_rate: int) -> Samples:
    """A voiced-like signal, 55 ms per character (at least 200 ms), the same for the same text."""
    seconds = max(MIN_SPEECH_MS, MS_PER_CHARACTER * len(text)) / 1000
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
    f0 = 100 + seed % 60
    # A glottal-like harmonic series with a little vibrato, shaped by two vowel-ish formants
    # that drift with the syllables, so voice-activity detectors hear a talker, not a tone.
    pitch = f0 * (1 + 0.03 * np.sin(2 * np.pi * 5 * t))
    phase = 2 * np.pi * np.cumsum(pitch) / sample_rate
    syllable = np.sin(np.pi * 4 * t + seed % 7) ** 2
    signal = np.zeros_like(t)
    for k in range(1, 40):
        if k * f0 * 1.1 >= sample_rate / 2:
            break
        formants = np.exp(-(((k * pitch - (500 + 250 * syllable)) / 180) ** 2))
        formants += 0.6 * np.exp(-(((k * pitch - (1500 - 400 * syllable)) / 250) ** 2))
        signal += (1 / k**2 + 3 * formants) * np.sin(k * phase)
    signal *= 0.35 + 0.65 * syllable
    ramp = min(len(t) // 2, int(0.015 * sample_rate))
    if ramp:
        signal[:ramp] *= np.linspace(0, 1, ramp)
        signal[-ramp:] *= np.linspace(1, 0, ramp)
    # About -14 dBFS RMS, and never past -1 dBFS at the peaks (no clipping after resampling).
    rms = float(np.sqrt(np.mean(signal**2))) or 1.0
    peak = float(np.abs(signal).max()) or 1.0
    return signal * min(10 ** (-14 / 20) / rms, 10 ** (-1 / 20) / peak)


def pcm16(samples: Samples) -> bytes:
    return _int16(samples).astype("<i2").tobytes()


def from_pcm16(data: bytes) -> Samples:
    return np.frombuffer(data[: len(data) // 2 * 2], dtype="<i2").astype(np.float64) / 32768


def _int16(samples: Samples) -> npt.NDArray[np.int64]:
    return np.clip(np.round(samples * 32768), -32768, 32767).astype(np.int64)


_ULAW_ENDS = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
_ALAW_ENDS = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])


def ulaw(samples: Samples) -> bytes:
    """G.711 μ-law as the ITU reference code does it (audioop is gone from newer Pythons)."""
    x = _int16(samples) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    x = np.minimum(np.abs(x), 8159) + 33
    segment = np.searchsorted(_ULAW_ENDS, x)
    code = np.where(segment >= 8, 0x7F, (segment << 4) | ((x >> (segment + 1)) & 0x0F))
    return (code ^ mask).astype(np.uint8).tobytes()


def from_ulaw(data: bytes) -> Samples:
    code = ~np.frombuffer(data, dtype=np.uint8).astype(np.int64) & 0xFF
    exponent = (code >> 4) & 0x07
    magnitude = ((((code & 0x0F) << 3) + 0x84) << exponent) - 0x84
    return np.where(code & 0x80, -magnitude, magnitude).astype(np.float64) / 32768


def alaw(samples: Samples) -> bytes:
    x = _int16(samples) >> 3
    mask = np.where(x >= 0, 0xD5, 0x55)
    x = np.where(x >= 0, x, -x - 1)
    segment = np.searchsorted(_ALAW_ENDS, x)
    shift = np.where(segment < 2, 1, segment)
    code = np.where(segment >= 8, 0x7F, (np.minimum(segment, 7) << 4) | ((x >> shift) & 0x0F))
    return (code ^ mask).astype(np.uint8).tobytes()


def wav(samples: Samples, sample_rate: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm16(samples))
    return out.getvalue()


def read_wav(data: bytes) -> tuple[Samples, int]:
    """Mono 16-bit PCM; for more channels, the first."""
    with wave.open(io.BytesIO(data), "rb") as w:
        channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
        frames = w.readframes(w.getnframes())
    if width != 2:
        raise ValueError("only 16-bit PCM WAV is understood")
    return from_pcm16(frames)[::channels], rate


def resample(samples: Samples, source: int, target: int) -> Samples:
    """Band-limited resampling in the frequency domain (exact enough for short clips)."""
    if source == target or len(samples) == 0:
        return samples
    length = round(len(samples) * target / source)
    spectrum = np.fft.rfft(samples)
    kept = np.zeros(length // 2 + 1, dtype=complex)
    n = min(len(kept), len(spectrum))
    kept[:n] = spectrum[:n]
    return np.fft.irfft(kept, length) * (length / len(samples))


def envelope(samples: Samples, sample_rate: int) -> Samples:
    """Log energy (dB) of 10 ms frames of the speech span, floored 40 dB under the peak."""
    x = resample(samples, sample_rate, ANALYSIS_RATE)
    frames = len(x) // FRAME
    if frames == 0:
        return np.zeros(0)
    energy = np.mean(x[: frames * FRAME].reshape(frames, FRAME) ** 2, axis=1)
    db = 10 * np.log10(energy + 1e-12)
    peak = float(db.max())
    if peak < SILENCE_DB:
        return np.zeros(0)
    loud = np.flatnonzero(db >= max(peak - 35, SILENCE_DB))
    floored: Samples = np.maximum(db[loud[0] : loud[-1] + 1], peak - DYNAMIC_RANGE_DB)
    return floored


def _correlation(a: Samples, b: Samples) -> float:
    a, b = a - a.mean(), b - b.mean()
    scale = float(np.sqrt(np.sum(a * a) * np.sum(b * b)))
    return float(np.sum(a * b)) / scale if scale > 0 else 0.0


def similarity(received: Samples, clip: Samples) -> float:
    """Best-alignment correlation of two envelopes, less what either leaves unmatched.

    The received audio may have lost up to a few hundred milliseconds at each end, so a
    clip only partly covered costs a little; audio that runs well past the clip costs more.
    """
    n, m = len(received), len(clip)
    if n < 5 or m < 5:
        return 0.0
    least = max(5, min(n, m) // 2)
    best = 0.0
    for shift in range(-(n - least), m - least + 1):
        start = max(0, -shift)
        overlap = min(n, m - shift) - start
        if overlap < least:
            continue
        r = received[start : start + overlap]
        c = clip[start + shift : start + shift + overlap]
        score = _correlation(r, c) - 0.3 * (1 - overlap / m) - 0.6 * (1 - overlap / n)
        best = max(best, score)
    return best


@dataclass(frozen=True)
class Phrase:
    name: str
    text: str
    envelope: Samples


@dataclass(frozen=True)
class PhraseBook:
    """The known recordings (a directory with manifest.json), recognised by energy envelope."""

    phrases: tuple[Phrase, ...]

    @classmethod
    def load(cls, directory: Path) -> PhraseBook:
        manifest = directory / "manifest.json"
        if not manifest.is_file():
            return cls(())
        phrases = []
        for clip in json.loads(manifest.read_text())["clips"]:
            samples, rate = read_wav((directory / clip["file"]).read_bytes())
            phrases.append(Phrase(clip["name"], clip["text"], envelope(samples, rate)))
        return cls(tuple(phrases))

    def recognise(self, samples: Samples, sample_rate: int) -> str:
        """The text of the best-matching phrase, or "" for silence or no good match."""
        received = envelope(samples, sample_rate)
        scored = [(similarity(received, p.envelope), p.text) for p in self.phrases]
        best = max(scored, default=(0.0, ""))
        return best[1] if best[0] >= MATCH_THRESHOLD else ""
