"""What the Qdrant connector asks of an engine, in engine-neutral terms.

Two engines answer it: a Qdrant server through qdrant-client
(``connectors.qdrant.server``) and Qdrant's own engine in this process through
qdrant-edge (``connectors.qdrant.edge``). The reads (``connectors.qdrant.reader``,
``connectors.qdrant.searcher``) build the requests below and read back points with
``id``, ``payload``, ``vector`` (and ``score`` when ranked); each engine turns the
requests into its library's own objects, so neither library is imported by the other
path. Method names follow qdrant-client's (they name the engine spans).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from connectors.base import SparseVector
from connectors.qdrant.query import AllOf

WithPayload = list[str] | bool
WithVectors = list[str] | bool


@dataclass(frozen=True, slots=True)
class Shape:
    """What a collection holds: its vectors and its payload indexes."""

    dense: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Dense vectors by name ("" for the unnamed default): (size, distance: Cosine, Dot,
    Euclid or another name Qdrant has)."""
    sparse: dict[str, bool] = field(default_factory=dict)
    """Sparse vectors by name: whether each carries the IDF modifier."""
    payload_schema: dict[str, str] = field(default_factory=dict)
    """Indexed payload fields: keyword, integer, float, datetime, text, ..."""


@dataclass(frozen=True, slots=True)
class Nearest:
    """Nearest neighbours of a dense or sparse vector (``using``: the collection's name)."""

    vector: list[float] | SparseVector
    using: str | None
    limit: int = 0
    """The depth of a prefetch (unused for the main query)."""


@dataclass(frozen=True, slots=True)
class Rrf:
    """Reciprocal rank fusion of the prefetches (weights only when they differ)."""

    k: int
    weights: list[float] | None


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked query: a nearest query, or prefetches fused by RRF, under one filter."""

    query: Nearest | Rrf
    qfilter: AllOf | None
    limit: int
    with_payload: WithPayload
    with_vectors: WithVectors
    prefetch: tuple[Nearest, ...] = ()


@dataclass(frozen=True, slots=True)
class Scroll:
    """One page of points by id (from ``offset``), or ordered by a payload field."""

    qfilter: AllOf | None
    limit: int
    with_payload: WithPayload
    with_vectors: WithVectors
    order_by: tuple[str, bool] | None = None
    """(payload field, newest first)."""
    offset: Any = None


class Engine(Protocol):
    """One collection's engine; every method may raise the engine's own exceptions,
    which :meth:`errors` translates."""

    engine_name: str
    """What the engine is, for describe (version included), set by :meth:`get_collection`."""

    async def get_collection(self) -> Shape: ...
    async def scroll(self, request: Scroll) -> tuple[list[Any], Any]: ...
    async def query_points(self, request: Ranked) -> list[Any]: ...
    async def query_batch_points(self, requests: list[Ranked]) -> list[list[Any]]: ...
    async def ping(self) -> bool: ...
    async def close(self) -> None: ...

    def errors(self) -> AbstractContextManager[None]:
        """Translate the engine's exceptions into :mod:`connectors.errors`."""
        ...

    def is_transient(self, exc: BaseException) -> bool:
        """Whether another try may succeed."""
        ...

    def retry_after_s(self, exc: BaseException) -> float | None:
        """How long the engine asked to wait before another try, if it said."""
        ...
