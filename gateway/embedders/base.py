"""The query embedder interface: text in, the dense vector the store's corpus was embedded with out.

A store's config names the embedder that matches how its corpus was embedded
(``search.embedder``); describe's ``embeddings.model`` reports
:attr:`QueryEmbedder.model_name`. Vectors from another model would be compared
without error and ranked meaninglessly, which is why the choice is the
operator's and never a default.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

DEFAULT_RETRY_AFTER_MS = 1000


class EmbedderUnavailable(Exception):
    """The embedder failed or answered nonsense; the query cannot be ranked densely.

    retryable: the service may answer later (unreachable, timed out, 429, 5xx);
    not retryable: it refused the request (a 4xx such as a bad key) or the model
    cannot be used. The dispatcher maps it to the wire (gateway.a2m.failures.to_a2m_error).
    Messages never carry the service's URL or key.
    """

    def __init__(
        self,
        message: str = "query embedder unavailable",
        retry_after_ms: int = DEFAULT_RETRY_AFTER_MS,
        *,
        retryable: bool = True,
    ) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms
        self.retryable = retryable


class MissingExtra(ValueError):
    """An optional dependency the config needs is not installed; the message names the extra."""


class QueryEmbedder(ABC):
    """Embeds query text for dense search."""

    @property
    @abstractmethod
    def model_name(self) -> str | None:
        """The model's name as configured (reported by describe)."""

    @property
    @abstractmethod
    def dimensions(self) -> int | None:
        """The vector width: configured, or learnt from the first answer; None until known."""

    @abstractmethod
    async def embed_query(self, text: str) -> list[float]:
        """The query's vector.

        Raises:
            EmbedderUnavailable: the model or service could not produce it.
        """

    async def warm(self) -> None:  # noqa: B027 - optional hook, most embedders load nothing
        """Load what the first query would (a local model), so it answers at its usual speed.

        Raises:
            EmbedderUnavailable: the model could not be loaded.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most embedders hold nothing
        """Release connections or threads; the embedder is not used afterwards."""


def l2_normalise(vector: list[float]) -> list[float]:
    """vector / |vector|; a zero vector is returned unchanged."""
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm > 0 else vector
