"""Tools: what an agent's model may call on a call (CONTRACT 10)."""
