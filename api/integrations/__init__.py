"""LLM provider integrations of a sub-account."""
