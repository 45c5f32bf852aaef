"""smart lists."""
