"""Pluggable query embedders (none, all-MiniLM-L6-v2, a sentence-transformers model, any
OpenAI-compatible endpoint).

Qdrant's lexical sparse encoder is not here: it lives with the connector that
uses it (:mod:`connectors.qdrant.sparse`).
"""

from gateway.embedders.base import EmbedderUnavailable, MissingExtra, QueryEmbedder
from gateway.embedders.factory import make_embedder

__all__ = ["EmbedderUnavailable", "MissingExtra", "QueryEmbedder", "make_embedder"]
