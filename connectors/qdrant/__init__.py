"""Qdrant: local mode and server (REST or gRPC), dense, sparse and hybrid reads."""
