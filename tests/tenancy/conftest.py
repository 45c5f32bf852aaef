"""Fixtures of the former voice folder (moved into tests/conftest.py next)."""

from tests.voice.conftest import worker  # noqa: F401  (fixture)
