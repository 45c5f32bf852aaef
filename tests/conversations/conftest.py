"""Fixtures of the former campaigns folder (moved into tests/factories.py and tests/conftest.py next)."""

from tests.campaigns.conftest import tenant_priced, worker  # noqa: F401  (fixtures)
