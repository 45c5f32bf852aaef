"""Fixtures of the former voice folder (moved into tests/factories.py and tests/conftest.py next)."""

from tests.voice.conftest import receiver, worker  # noqa: F401  (fixtures)
