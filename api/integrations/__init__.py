"""LLM and speech vendor integrations of a sub-account."""
