"""Phone numbers: purchase, import, assign to an agent, release."""
