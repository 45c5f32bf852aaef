"""G.711 μ-law for 16-bit PCM, in numpy (the standard library's audioop is gone in Python 3.13)."""

from __future__ import annotations

import numpy as np

SILENCE = 0xFF  # the μ-law byte for a zero sample
_BIAS = 0x84
_CLIP = 8159  # in 14-bit units, as G.711 counts


def _decode_table() -> np.ndarray:
    byte = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (byte >> 4) & 0x07
    magnitude = (((byte & 0x0F) << 3) + _BIAS) << exponent
    return np.where(byte & 0x80, _BIAS - magnitude, magnitude - _BIAS).astype(np.int16)


_DECODE = _decode_table()
# The segment of a 14-bit biased magnitude v is the bit length of v >> 6 (0 through 8).
_SEGMENT = np.array([int(i).bit_length() for i in range(129)], dtype=np.int32)


def encode(pcm: bytes) -> bytes:
    """16-bit little-endian PCM to μ-law, one byte per sample (the same bytes audioop gives)."""
    value = np.frombuffer(pcm, dtype="<i2").astype(np.int32) >> 2
    mask = np.where(value < 0, 0x7F, 0xFF)
    value = np.minimum(np.abs(value), _CLIP) + (_BIAS >> 2)
    segment = _SEGMENT[value >> 6]
    byte = (np.minimum(segment, 7) << 4) | ((value >> (segment + 1)) & 0x0F)
    byte = np.where(segment > 7, 0x7F, byte)
    return (byte ^ mask).astype(np.uint8).tobytes()


def decode(ulaw: bytes) -> bytes:
    """μ-law to 16-bit little-endian PCM."""
    return _DECODE[np.frombuffer(ulaw, dtype=np.uint8)].astype("<i2").tobytes()
