"""Query planner: validated params + caller -> a read plan, or "nothing can match".

Pure: no I/O and no engine state beyond the EngineInfo it is handed. It owns
the query-length and key checks, `where` -> engine filter and scope merging
(limits are the front's). A plan is a value: the engine request for any page
size and the exact `where` predicate, built once per call. The RecordPager runs
it (asking again with larger pages while the predicate drops records); the
ResultShaper maps what comes back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, ClassVar

from connectors.base import (
    Condition,
    Connector,
    EngineInfo,
    Filter,
    Fusion,
    Hit,
    OrderedRequest,
    SearchRequest,
    TimeWindows,
)
from gateway.a2m.errors import InvalidParams
from gateway.a2m.params import WhereValue
from gateway.a2m.records import Record, parse_timestamp
from gateway.config import SearchMode, StoreConfig
from gateway.security.scopes import Caller, NothingVisible, ScopePolicy
from gateway.store.mapping import TIME_FIELDS, UNFILTERABLE_FIELDS, RecordMapper
from gateway.store.query_text import lexical_text

# -- the plan ------------------------------------------------------------------------

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
    passage_text: str | None = None

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
            passage_text=self.passage_text,
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


# -- the planner ---------------------------------------------------------------------


class MatchesNothing(Exception):
    """The request can match no record: answer empty, with no engine call."""


class QueryPlanner:
    """Turns one store's params into read plans."""

    def __init__(self, config: StoreConfig, mapper: RecordMapper, scope: ScopePolicy) -> None:
        self.config = config
        self.mapper = mapper
        self.scope = scope
        s = config.search
        self._skeleton = SearchSkeleton(
            s.knn_candidates, s.fusion_depth, s.rrf_k, s.fusion, s.lexical_weight, s.dense_weight
        )
        self._drop_question_words = s.question_words == "drop"
        self._passages = s.passages is not None and s.passages.enabled
        self._lexical_mode = s.mode in (SearchMode.LEXICAL, SearchMode.HYBRID)
        self._dense_mode = s.mode in (SearchMode.DENSE, SearchMode.HYBRID)

    def query_text(self, query: str | None) -> str:
        """The query text, stripped.

        Raises:
            InvalidParams: longer than max_query_length.
        """
        max_len = self.config.limits.max_query_length
        if len(query or "") > max_len:
            raise InvalidParams(f"query is longer than max_query_length ({max_len})")
        return (query or "").strip()

    # -- filters ------------------------------------------------------------------

    def read_filter(
        self,
        where: dict[str, WhereValue] | None,
        key_prefix: str | None,
        caller: Caller,
        owner: str | None,
    ) -> Filter:
        """The caller's `where` and `key_prefix`, ANDed with its scope.

        `where` is checked first, so a bad request gets the same answer whoever sends it.

        Raises:
            InvalidParams: a bad `where` or `key_prefix`.
            ScopeDenied: see ScopePolicy.conditions.
            MatchesNothing: an unexposed `where` key, or a scope that sees nothing.
        """
        matches_nothing = False
        try:
            flt = self._filter(where, key_prefix)
        except MatchesNothing:
            matches_nothing = True
        try:
            scope = self.scope.conditions(caller, owner)
        except NothingVisible:
            raise MatchesNothing from None
        if matches_nothing:
            raise MatchesNothing
        if not scope:
            return flt
        return dataclasses.replace(flt, must=(*scope, *flt.must))

    def without_groups(self, flt: Filter, groups: Sequence[str]) -> Filter:
        """``flt``, leaving out the documents whose group is one of ``groups`` (exactly, where
        the engine can match the group field so; see Filter.must_not)."""
        field = self.mapper.engine_field("group")
        if field is None or not groups:
            return flt
        left_out = Condition(field=field, values=tuple(groups))
        return dataclasses.replace(flt, must_not=(*flt.must_not, left_out))

    def key_filter(self, key: str, caller: Caller, owner: str | None) -> Filter:
        """The filter of memory/fetch: the key, ANDed with the caller's scope.

        Raises:
            InvalidParams: the key is too long.
            ScopeDenied: see ScopePolicy.conditions.
            MatchesNothing: the scope sees nothing.
        """
        key_field = self.config.mapping.key
        assert key_field is not None  # fetch is gated on the keys capability
        if len(key) > self.config.limits.max_key_length:
            raise InvalidParams(f"key is longer than {self.config.limits.max_key_length}")
        try:
            scope = self.scope.conditions(caller, owner)
        except NothingVisible:
            raise MatchesNothing from None
        return Filter(must=(*scope, Condition(field=key_field, values=(key,))))

    def _filter(self, where: dict[str, WhereValue] | None, key_prefix: str | None) -> Filter:
        if not where and key_prefix is None:
            return _NO_FILTER
        lim = self.config.limits
        must: list[Condition] = []
        times: list[TimeWindows] = []
        unexposed = False
        if where and len(where) > lim.max_where_keys:
            raise InvalidParams(f"where has more than {lim.max_where_keys} keys")
        for name, value in (where or {}).items():
            values = tuple(value) if isinstance(value, list) else (value,)
            if len(values) > lim.max_where_values:
                raise InvalidParams(
                    f"where.{name[:64]} has more than {lim.max_where_values} values"
                )
            if name in UNFILTERABLE_FIELDS:
                raise InvalidParams(f"where.{name} is not an equality-filterable field")
            if name == "content" and self.config.mapping.content_template:
                raise InvalidParams(
                    "where.content is not offered: this store's content joins several fields"
                )
            field = self.mapper.engine_field(name)
            if field is None:
                # Never filter on a field the mapping does not expose: it matches nothing.
                unexposed = True
                continue
            if name in TIME_FIELDS:
                times.append(TimeWindows(field=field, windows=_ms_windows(name, values)))
                continue
            if name == "id":
                values = tuple(str(v) for v in values)
            must.append(Condition(field=field, values=values, phrase=name == "content"))
        prefix: tuple[str, str] | None = None
        if key_prefix is not None:
            if len(key_prefix) > lim.max_key_length:
                raise InvalidParams(f"key_prefix is longer than {lim.max_key_length}")
            assert self.config.mapping.key is not None  # keys declared only when mapped
            prefix = (self.config.mapping.key, key_prefix)
        if unexposed:
            raise MatchesNothing
        return Filter(must=tuple(must), key_prefix=prefix, times=tuple(times))

    # -- requests -----------------------------------------------------------------

    def needs_embedding(self, text: str, vector: list[float] | None) -> bool:
        """Whether the server's embedder must turn the query text into a vector."""
        return vector is None and bool(text) and self._dense_mode

    def search_plan(
        self,
        text: str,
        dense: list[float] | None,
        flt: Filter,
        where: dict[str, WhereValue] | None,
        limit: int,
        *,
        info: EngineInfo | None,
        given_vector: bool,
        with_vectors: bool,
    ) -> SearchPlan:
        """The ranked read of a query text and/or vector.

        Raises:
            MatchesNothing: neither a text the engine can rank by nor a vector.
        """
        lexical = bool(text) and (self._lexical_mode or given_vector)
        if info is not None and not info.lexical:
            lexical = False
        # Qdrant encodes the text into its sparse leg itself (connectors.qdrant.sparse);
        # a question's own words are dropped first, alike for every engine.
        lex_text = (lexical_text(text) if self._drop_question_words else text) if lexical else None
        if dense is None and lex_text is None:
            raise MatchesNothing
        return SearchPlan(
            limit=limit,
            exact=ExactMatch.of(where),
            with_vectors=with_vectors,
            skeleton=self._skeleton,
            filter=flt,
            text=lex_text,
            dense=dense,
            passage_text=(lex_text or text) if self._passages and text else None,
        )

    @staticmethod
    def ordered_plan(
        flt: Filter,
        where: dict[str, WhereValue] | None,
        limit: int,
        *,
        with_vectors: bool,
        newest_first: bool = True,
    ) -> OrderedPlan:
        """The ordered read of timeline, and of recall without a query: newest first."""
        return OrderedPlan(
            limit=limit,
            exact=ExactMatch.of(where),
            with_vectors=with_vectors,
            filter=flt,
            newest_first=newest_first,
        )


def _ms_windows(name: str, values: tuple[WhereValue, ...]) -> tuple[tuple[str, str], ...]:
    """Each timestamp as the millisecond it names: [t, t + 1 ms).

    Raises:
        InvalidParams: a value is not an RFC 3339 timestamp string.
    """
    windows = []
    for value in values:
        try:
            ts = parse_timestamp(value) if isinstance(value, str) else None
            if ts is None:
                raise InvalidParams(f"where.{name} takes RFC 3339 timestamps")
            start = ts.replace(microsecond=ts.microsecond // 1000 * 1000)
            windows.append((_engine_time(start), _engine_time(start + _MS)))
        except (OverflowError, ValueError):
            # Found by fuzzing: 9999-12-31T23:59:59.999Z (+1 ms), 0001-01-01T00:00:00+01:00
            # (before year 1 in UTC) and digit strings past int()'s 4300-digit limit.
            raise InvalidParams(f"where.{name}: timestamp out of range") from None
    return tuple(windows)


_MS = timedelta(milliseconds=1)
_NO_FILTER = Filter()


def _engine_time(ts: datetime) -> str:
    """An engine-facing UTC bound with a four-digit year, whatever the platform's strftime.

    Found by fuzzing: strftime("%Y") writes year 999 as "999", which no engine parses.
    """
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
