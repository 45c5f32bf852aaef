"""Text and JSON from outside (a tool's answer, a tool call's arguments, a model's reply, an
analysis) as PostgreSQL can store them (CONTRACT 18a "What cannot be stored is cleaned").

Its text and jsonb hold no NUL; UTF-8 has no lone surrogate (which JSON's `\\ud800` escape and a
Python str allow); JSON has no NaN or Infinity (which Python's json module reads and writes). So
a NUL is removed, a lone surrogate becomes U+FFFD (a split pair is joined) and a non-finite number
becomes null, in strings, numbers and dict keys at any depth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any


def storable_text(text: str) -> str:
    """`text` without NUL, each lone surrogate as U+FFFD."""
    text = text.replace("\x00", "")
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Through UTF-16: a high and a low surrogate side by side are one character again.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings, numbers, nested) as it can be stored."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, Mapping):
        return {
            storable_text(key) if isinstance(key, str) else key: storable(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value
