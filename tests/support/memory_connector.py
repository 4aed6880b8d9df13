"""An engine in memory, for unit tests of engine-independent code.

:class:`MemoryConnector` applies a :class:`Filter` the way the real connectors do
(equality, any-of, list-valued fields match if any element does, key prefix) and records
every request, so a test can prove what reached the engine and what never did. Given
``answers``, it plays an engine that has already filtered and ranked: every search and
ordered read returns those hits as they are, scores included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connectors.base import (
    ID_FIELD,
    Condition,
    EngineInfo,
    Filter,
    Hit,
    OrderedRequest,
    SearchRequest,
    VectorInfo,
)


def values_of(source: Mapping[str, Any], name: str) -> list[Any]:
    value = source.get(name)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def matches(doc_id: str, source: Mapping[str, Any], flt: Filter) -> bool:
    """Filter semantics shared by every connector: a conjunction of any-of equalities."""
    for cond in flt.must:
        have = [doc_id] if cond.field == ID_FIELD else values_of(source, cond.field)
        if not any(v in cond.values for v in have):
            return False
    if flt.key_prefix is not None:
        name, prefix = flt.key_prefix
        if not any(str(v).startswith(prefix) for v in values_of(source, name)):
            return False
    for cond in flt.must_not:
        have = [doc_id] if cond.field == ID_FIELD else values_of(source, cond.field)
        if any(v in cond.values for v in have):
            return False
    return True


@dataclass
class MemoryConnector:
    """Documents in a list; search scores by shared words with the query."""

    docs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answers: list[Hit] | None = None
    """A fixed answer to every search and ordered read (up to its limit), whatever the filter."""
    vectors: VectorInfo | None = None
    searches: list[SearchRequest] = field(default_factory=list)
    ordered_reads: list[OrderedRequest] = field(default_factory=list)
    fetches: list[Filter] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.searches) + len(self.ordered_reads) + len(self.fetches)

    def conditions(self) -> list[tuple[Condition, ...]]:
        """The `must` of every request received, in order."""
        out = [r.filter.must for r in self.searches]
        out += [r.filter.must for r in self.ordered_reads]
        out += [f.must for f in self.fetches]
        return out

    async def open(self) -> EngineInfo:
        return EngineInfo(engine="memory", vectors=self.vectors, lexical=True)

    async def close(self) -> None:
        return None

    async def ping(self) -> bool:
        return True

    def _visible(self, flt: Filter) -> list[tuple[str, dict[str, Any]]]:
        return [(i, s) for i, s in self.docs if matches(i, s, flt)]

    async def search(self, request: SearchRequest) -> list[Hit]:
        self.searches.append(request)
        if self.answers is not None:
            return [Hit(h.id, h.source, h.score) for h in self.answers[: request.limit]]
        words = set((request.text or "").lower().split())
        scored = []
        for doc_id, source in self._visible(request.filter):
            text = str(source.get("body", "")).lower().split()
            score = len(words.intersection(text)) / (1 + len(words))
            scored.append(Hit(doc_id, dict(source), score))
        scored.sort(key=lambda h: -(h.score or 0))
        return scored[: request.limit]

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        self.ordered_reads.append(request)
        if self.answers is not None:
            return [Hit(h.id, h.source) for h in self.answers[: request.limit]]
        docs = sorted(self._visible(request.filter), key=lambda d: str(d[1].get("ts", "")))
        if request.newest_first:
            docs.reverse()
        return [Hit(i, dict(s)) for i, s in docs[: request.limit]]

    async def fetch(self, flt: Filter, with_vectors: bool = False) -> Hit | None:
        self.fetches.append(flt)
        found = self._visible(flt)
        return Hit(found[0][0], dict(found[0][1])) if found else None
