"""The small async interface every engine connector implements.

A connector knows its engine and nothing of JSON-RPC or A2M records: it takes
engine-level requests (field names are the engine's, already translated from
A2M by the store) and returns raw hits. The store turns hits into records
through the one mapper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Scalar = str | int | float | bool

ID_FIELD = "_id"
"""Pseudo field name: the engine's own document/point id."""

Metric = Literal["cosine", "dot", "l2"]


def value_at(document: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path ('a.b'), or None.

    The literal key is tried first: engine field names (and JWT claim names such
    as 'https://example.com/groups') may themselves contain dots.
    """
    if path in document:
        return document[path]
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True, slots=True)
class Condition:
    """Equality on one engine field; several values mean any-of.

    phrase: the field is analysed text (a record's content); the connector
    matches the values as phrases and the store checks exact equality after.
    """

    field: str
    values: tuple[Scalar, ...]
    phrase: bool = False


@dataclass(frozen=True, slots=True)
class TimeWindows:
    """A date field inside any of the half-open windows [gte, lt) (ISO 8601 UTC strings).

    Equality on a record timestamp is a one-millisecond window, which holds
    whatever precision the engine stores dates at.
    """

    field: str
    windows: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Filter:
    """A conjunction: every condition holds and, when set, the key field starts with prefix;
    and none of ``must_not`` holds."""

    must: tuple[Condition, ...] = ()
    key_prefix: tuple[str, str] | None = None
    """(engine field, prefix)."""
    times: tuple[TimeWindows, ...] = ()
    must_not: tuple[Condition, ...] = ()
    """Exact equalities that leave a document out (never ``phrase``): a connector that
    cannot match one exactly ignores it (leaving out more than asked would lose records),
    so a reader still checks what it needs of them."""


@dataclass(frozen=True, slots=True)
class SparseVector:
    indices: tuple[int, ...]
    values: tuple[float, ...]


Fusion = Literal["rrf", "minmax", "zscore", "dbsf"]
"""How a hybrid search's two ranked lists become one (``search.fusion``):

- ``rrf``: weighted reciprocal rank fusion, ``weight / (k + rank)`` per list;
- ``zscore``, ``minmax``, ``dbsf``: a convex combination ``sum(share x normalised score)``
  of each list's scores normalised over that list (z-score; min-max; distribution-based,
  the mean +- 3 standard deviations mapped onto [0, 1]), ``share`` each list's weight
  over the weights' sum. A document one list did not return gets that list's lowest
  normalised score. A combined z-score is reported through a logistic, into (0, 1).
"""


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A ranked search. At least one of text, dense, sparse is set.

    text: lexical (BM25) query text: ES/OS analyse it, Qdrant encodes it into its sparse
    leg. sparse: a ready sparse vector for Qdrant's lexical leg (wins over text).
    dense: a query vector. When a lexical leg and dense are both present the
    connector fuses them by ``fusion`` with the given weights (and k for RRF).
    """

    limit: int
    filter: Filter = field(default_factory=Filter)
    text: str | None = None
    sparse: SparseVector | None = None
    dense: Sequence[float] | None = None
    with_vectors: bool = False
    candidates: int = 100
    fusion_depth: int | None = None
    """Hits per leg of a Lucene hybrid search; None: ``candidates``."""
    rrf_k: int = 60
    lexical_weight: float = 1.0
    dense_weight: float = 1.0
    fusion: Fusion = "rrf"
    """How two legs are fused (:data:`Fusion`)."""
    passage_text: str | None = None
    """The text a hit's passages answer (``search.passages``): the engine's highlighter
    scores its content's sentences against it, whichever leg found the hit."""


@dataclass(frozen=True, slots=True)
class OrderedRequest:
    """Records in a defined order, no relevance: for timeline and for recall without a query.

    newest_first=True returns the newest `limit` records, newest first; the
    store reverses them for timeline. The order is the store's created_at field
    when mapped, else the connector's documented stable fallback.
    """

    limit: int
    filter: Filter = field(default_factory=Filter)
    newest_first: bool = True
    with_vectors: bool = False


@dataclass(frozen=True, slots=True)
class Passages:
    """The passages of a hit's content field the engine chose: each ``(start, end)``
    character span of the whole content (``length`` characters) and its text, in text
    order; ``best``: the index of the one the engine ranked first."""

    spans: tuple[tuple[int, int], ...]
    texts: tuple[str, ...]
    length: int
    best: int = 0


@dataclass(slots=True)
class Hit:
    """One engine document. score is in [0, 1], higher is better (None for ordered reads)."""

    id: str
    source: dict[str, Any]
    score: float | None = None
    vector: list[float] | None = None
    highlight: str | None = None
    index: str | None = None
    """The concrete index that holds it (an alias can span several), when the engine says."""
    routing: str | None = None
    """Its custom routing value: one index can hold the same id once per routing value."""
    passages: Passages | None = None
    """Its content's passages, when the engine chose them (``search.passages``)."""
    anchors: tuple[tuple[str, int | None], ...] = ()
    """The nested passages the kNN leg matched best (``search.nested_passages``), best
    first: each one's text and, when indexed, its start in the content."""

    @property
    def identity(self) -> tuple[str | None, str | None, str]:
        """What names exactly one document: ``id`` is unique only within (index, routing)."""
        return (self.index, self.routing, self.id)


@dataclass(frozen=True, slots=True)
class VectorInfo:
    dimensions: int | None
    metric: Metric
    metrics: tuple[Metric, ...]


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What the engine really holds, read at open(): it drives memory/describe."""

    engine: str
    """e.g. 'elasticsearch 8.19.3' — for logs and `check`, not put on the wire."""
    vectors: VectorInfo | None = None
    lexical: bool = False
    indexes: tuple[IndexNeed, ...] = ()
    """The engine-side indexes the store's mapping relies on (Qdrant payload indexes)."""


@dataclass(frozen=True, slots=True)
class IndexNeed:
    """One index the mapping needs on a field: which kinds do, whether it is there, and why."""

    field: str
    kinds: tuple[str, ...]
    """Index kinds that serve (e.g. Qdrant's 'keyword'; 'datetime', 'integer', 'float')."""
    present: bool
    purpose: str
    without: str
    """What happens without it: refused at open, or slower (a payload scan)."""


@runtime_checkable
class Connector(Protocol):
    """One engine index/collection behind one store.

    Every method may raise the exceptions of :mod:`connectors.errors` and nothing
    else; the connector translates its client's exceptions at this boundary.
    Reads are idempotent and retried inside the connector; the caller enforces
    the overall deadline.
    """

    async def open(self) -> EngineInfo:
        """Connect, check the index/collection exists and read what it holds."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> bool:
        """True when the engine answers; never raises."""
        ...

    async def search(self, request: SearchRequest) -> list[Hit]:
        """Ranked hits, best first, scores normalised into [0, 1]."""
        ...

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        """Hits in creation order (see OrderedRequest)."""
        ...

    async def fetch(self, flt: Filter, with_vectors: bool = False) -> Hit | None:
        """The first document matching flt (used with key equality), or None."""
        ...
