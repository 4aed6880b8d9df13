"""Qdrant: in process (qdrant-edge) and server (REST or gRPC), dense, sparse and hybrid reads."""
