"""Leaf adapters to the outside world, each an interface with implementations."""
