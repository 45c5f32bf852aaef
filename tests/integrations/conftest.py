"""Fixtures of the former delivery and voice folders (moved into tests/conftest.py next)."""

from tests.delivery.conftest import dns, receiver, worker_env  # noqa: F401  (fixtures)
from tests.voice.conftest import worker  # noqa: F401  (fixture)
