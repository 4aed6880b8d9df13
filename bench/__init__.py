"""Benchmarks of the gateway: retrieval quality (bench.quality) and cost (bench.latency).

Not part of the installed package and not run by CI except through the smoke
test in tests/bench; see docs/benchmarks.md.
"""
