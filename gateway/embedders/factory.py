"""Build the store's query embedder from its config; each adapter's dependencies load lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config import EmbedderKind

if TYPE_CHECKING:
    from gateway.config import EmbedderConfig
    from gateway.embedders.base import QueryEmbedder


def make_embedder(cfg: EmbedderConfig) -> QueryEmbedder | None:
    """The embedder cfg names, or None for ``kind: none`` (callers send vectors, or lexical).

    Raises:
        ValueError: the config lacks what its kind needs, or (``local``) the
            sentence-transformers package is not installed, or (``minilm``) its extra is not.
    """
    if cfg.kind is EmbedderKind.NONE:
        return None
    if cfg.kind is EmbedderKind.OPENAI:
        from gateway.embedders.openai import OpenAICompatibleEmbedder

        if not cfg.url or not cfg.model:
            raise ValueError("embedder.kind 'openai' needs embedder.url and embedder.model")
        return OpenAICompatibleEmbedder(
            url=cfg.url,
            model=cfg.model,
            api_key=cfg.api_key.get_secret_value() if cfg.api_key is not None else None,
            dimensions=cfg.dimensions,
            timeout_s=cfg.timeout_ms / 1000.0,
            normalize=cfg.normalize,
        )
    if cfg.kind is EmbedderKind.MINILM:
        from gateway.embedders.minilm import MiniLMEmbedder

        return MiniLMEmbedder(weights=cfg.weights, dimensions=cfg.dimensions)
    if cfg.kind is EmbedderKind.LOCAL:
        from gateway.embedders.local import LocalEmbedder

        if not cfg.model:
            raise ValueError("embedder.kind 'local' needs embedder.model")
        return LocalEmbedder(model=cfg.model, dimensions=cfg.dimensions, normalize=cfg.normalize)
    raise ValueError(f"unknown embedder kind {cfg.kind!r}")
