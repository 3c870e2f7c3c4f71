"""Benchmarks for ebb and the generators of the synthetic clusters they run on."""
