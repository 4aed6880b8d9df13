"""Pluggable query embedders (none, all-MiniLM-L6-v2, a sentence-transformers model, any
OpenAI-compatible endpoint).

Also home of the lexical sparse encoder (:mod:`gateway.embedders.lexical`),
Qdrant's lexical leg, which needs no model at all.
"""

from gateway.embedders.base import EmbedderUnavailable, QueryEmbedder
from gateway.embedders.factory import make_embedder

__all__ = ["EmbedderUnavailable", "QueryEmbedder", "make_embedder"]
