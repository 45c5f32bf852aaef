"""Fixtures of the former delivery folder (moved into tests/conftest.py next)."""

from tests.delivery.conftest import dns, receiver, worker_env  # noqa: F401  (fixtures)
