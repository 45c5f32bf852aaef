"""Outbound AI calls and their records."""
