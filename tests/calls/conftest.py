"""Fixtures of the call tests: the post-call webhook lands in a receiver that answers 204."""

from tests.receiver import post_box  # noqa: F401  (`receiver`)
