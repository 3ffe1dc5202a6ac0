"""Benchmarks: scripts that print tables of measured figures, side by side with baselines."""
