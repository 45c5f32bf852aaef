"""Fixtures of the conversation tests: the SMTP server that holds messages mid-send
(`gated_sink`, tests/campaigns/test_worker_crash.py)."""

from tests.campaigns.test_worker_crash import gated_sink  # noqa: F401  (fixture)
