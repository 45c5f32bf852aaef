"""Number pools: caller IDs used round-robin for outbound calls."""
