"""A read plan: what one read asks the engine at a page size, and which records it keeps.

The QueryPlanner builds one per call; the RecordPager runs it. A plan is a value:
it names the engine request for any page size (the pager asks again with larger
pages while the exact check drops records) and the exact `where` predicate, built
once per call from `where` rather than once per page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, ClassVar

from connectors.base import Connector, Filter, Fusion, Hit, OrderedRequest, SearchRequest
from gateway.a2m.params import WhereValue
from gateway.a2m.records import Record
from gateway.config import SearchConfig
from gateway.store.mapping import TIME_FIELDS

Getter = Callable[[Record], Any]

_RECORD_FIELDS = ("id", "content", "key", "group", "role", "uri", "media_type", "owner")
_FIELD_GETTERS: dict[str, Getter] = {name: attrgetter(name) for name in _RECORD_FIELDS}


def _metadata_getter(name: str) -> Getter:
    return lambda record: (record.metadata or {}).get(name)


class ExactMatch:
    """`where`'s string equalities, checked on mapped records (arrays match any element).

    An engine may only approximate `where`: content, and any analysed text field
    without an exact sub-field, is matched as a phrase. A2M's where is equality, so
    what the engine let through is checked here. Time fields are matched exactly by
    millisecond windows already, and non-string values exactly by the engine.
    """

    __slots__ = ("_checks",)

    def __init__(self, checks: Sequence[tuple[Getter, frozenset[str]]]) -> None:
        self._checks = tuple(checks)

    @classmethod
    def of(cls, where: dict[str, WhereValue] | None) -> ExactMatch | None:
        """The predicate for `where`; None when the engine's filter is exact already."""
        checks = []
        for name, value in (where or {}).items():
            if name in TIME_FIELDS:
                continue
            wanted = frozenset(
                v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)
            )
            if wanted:
                getter = _FIELD_GETTERS.get(name) or _metadata_getter(name)
                checks.append((getter, wanted))
        return cls(checks) if checks else None

    def __call__(self, record: Record) -> bool:
        for get, wanted in self._checks:
            value = get(record)
            values = value if isinstance(value, list) else (value,)
            if not any(not isinstance(v, str) or v in wanted for v in values if v is not None):
                return False
        return True


@dataclass(frozen=True, slots=True)
class SearchSkeleton:
    """A store's fixed search settings: every part of a SearchRequest that no call changes."""

    candidates: int
    depth: Callable[[int], int | None]
    rrf_k: int
    fusion: Fusion
    lexical_weight: float
    dense_weight: float

    @classmethod
    def of(cls, search: SearchConfig) -> SearchSkeleton:
        return cls(
            candidates=search.knn_candidates,
            depth=search.fusion_depth,
            rrf_k=search.rrf_k,
            fusion=search.fusion,
            lexical_weight=search.lexical_weight,
            dense_weight=search.dense_weight,
        )


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """A ranked read: the engine's scores (in [0, 1], best first) are the records' scores."""

    operation: ClassVar[str] = "search"
    ranked: ClassVar[bool] = True

    limit: int
    exact: ExactMatch | None
    with_vectors: bool
    skeleton: SearchSkeleton
    filter: Filter
    text: str | None
    dense: Sequence[float] | None

    def request(self, size: int) -> SearchRequest:
        """The engine request for a page of `size`: kNN breadth and leg depth grow with it."""
        s = self.skeleton
        return SearchRequest(
            limit=size,
            filter=self.filter,
            text=self.text,
            dense=self.dense,
            with_vectors=self.with_vectors,
            candidates=max(s.candidates, size),
            fusion_depth=s.depth(size),
            rrf_k=s.rrf_k,
            fusion=s.fusion,
            lexical_weight=s.lexical_weight,
            dense_weight=s.dense_weight,
        )

    async def read(self, connector: Connector, size: int) -> list[Hit]:
        return await connector.search(self.request(size))


@dataclass(frozen=True, slots=True)
class OrderedPlan:
    """An ordered read (no relevance): the records carry no engine score."""

    operation: ClassVar[str] = "ordered"
    ranked: ClassVar[bool] = False

    limit: int
    exact: ExactMatch | None
    with_vectors: bool
    filter: Filter
    newest_first: bool

    def request(self, size: int) -> OrderedRequest:
        return OrderedRequest(
            limit=size,
            filter=self.filter,
            newest_first=self.newest_first,
            with_vectors=self.with_vectors,
        )

    async def read(self, connector: Connector, size: int) -> list[Hit]:
        return await connector.ordered(self.request(size))


ReadPlan = SearchPlan | OrderedPlan
