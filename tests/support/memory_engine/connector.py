"""The memory engine's connector: documents read from a JSON file when the store opens.

Search scores a document by the share of the query's distinct words found in its
mapped content (words: runs of letters and digits, case folded); documents sharing no
word are not hits. Ordered reads follow the mapped ``created_at`` (then the id).
Filters are the real connectors' (equality, any-of, key prefix, time windows; a phrase
condition matches where the phrase's words appear in order).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from connectors.base import Connector, EngineInfo, Filter, Hit, OrderedRequest, SearchRequest
from connectors.errors import EngineConfigError
from connectors.spec import ConnectorSpec
from tests.support.memory_connector import MemoryConnector, matches, values_of
from tests.support.memory_engine.spec import MemoryConnectionSpec, MemorySpec

_WORD = re.compile(r"\w+")


def words(text: object) -> list[str]:
    return _WORD.findall(str(text).casefold())


def _phrase_holds(source: Mapping[str, Any], field: str, phrase: object) -> bool:
    wanted = " ".join(words(phrase))
    return any(wanted in " ".join(words(v)) for v in values_of(source, field))


def instant(value: object) -> datetime | None:
    """An ISO 8601 string or epoch milliseconds as an aware datetime; None: neither."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value / 1000, UTC)
        parsed = datetime.fromisoformat(str(value))
    except (ValueError, OverflowError, OSError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _in_windows(
    source: Mapping[str, Any], field: str, windows: tuple[tuple[str, str], ...]
) -> bool:
    stamps = [t for t in map(instant, values_of(source, field)) if t is not None]
    bounds = [(instant(gte), instant(lt)) for gte, lt in windows]
    return any(a is not None and b is not None and a <= t < b for t in stamps for a, b in bounds)


class MemoryEngineConnector(MemoryConnector):
    """:class:`MemoryConnector`'s filters over the documents of ``connection.documents``,
    searched and ordered by the store's mapped fields."""

    def __init__(self, spec: MemorySpec) -> None:
        super().__init__()
        self._path = spec.connection.documents
        self._content = spec.fields.content
        self._created_at = spec.fields.created_at

    async def open(self) -> EngineInfo:
        """Read the documents.

        Raises:
            EngineConfigError: the file is missing or is not a list of documents with ids.
        """
        try:
            raw = await asyncio.to_thread(Path(self._path).read_bytes)
            self.docs = [(str(d["id"]), dict(d)) for d in orjson.loads(raw)]
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise EngineConfigError(
                "connection.documents: not a readable list of documents"
            ) from exc
        return await super().open()

    def _visible(self, flt: Filter) -> list[tuple[str, dict[str, Any]]]:
        plain = Filter(tuple(c for c in flt.must if not c.phrase), flt.key_prefix)
        phrases = [c for c in flt.must if c.phrase]
        return [
            (i, s)
            for i, s in self.docs
            if matches(i, s, plain)
            and all(any(_phrase_holds(s, c.field, v) for v in c.values) for c in phrases)
            and all(_in_windows(s, t.field, t.windows) for t in flt.times)
        ]

    async def search(self, request: SearchRequest) -> list[Hit]:
        self.searches.append(request)
        asked = set(words(request.text or ""))
        hits = []
        for doc_id, source in self._visible(request.filter):
            found = asked.intersection(words(source.get(self._content or "", "")))
            if found:
                hits.append(Hit(doc_id, dict(source), len(found) / len(asked)))
        hits.sort(key=lambda h: -(h.score or 0.0))
        return hits[: request.limit]

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        self.ordered_reads.append(request)
        field = self._created_at or ""
        earliest = datetime.min.replace(tzinfo=UTC)
        docs = sorted(
            self._visible(request.filter),
            key=lambda d: (instant(d[1].get(field)) or earliest, d[0]),
        )
        if request.newest_first:
            docs.reverse()
        return [Hit(i, dict(s)) for i, s in docs[: request.limit]]


def make_memory_connector(spec: ConnectorSpec[Any]) -> Connector:
    """The connector of one memory store.

    Raises:
        TypeError: the spec's connection is not a memory store's.
    """
    return MemoryEngineConnector(spec.of(MemoryConnectionSpec))
