"""Argument types shared by the `switchboard` commands."""

from __future__ import annotations

import argparse
import uuid


def uuid_argument(value: str) -> uuid.UUID:
    """An id on the command line; anything else is argparse's one-line usage error."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a UUID: {value}") from None
