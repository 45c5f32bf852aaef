"""Benchmarks: each measures against a baseline in the same run and writes bench/RESULTS.md."""
