"""Retrieval quality of the gateway on a BEIR-layout collection; see docs/benchmarks.md."""
