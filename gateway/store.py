"""Store: one configured index behind one A2M endpoint.

The store owns A2M's recall/timeline/fetch semantics (limits, `where`,
scores, ordering, prompt rendering) and turns them into engine-level requests
for its connector. It is transport- and JSON-RPC-agnostic; errors it raises are
A2M errors or connector errors, turned into wire errors at one boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from array import array
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from connectors.base import (
    Condition,
    Connector,
    EngineInfo,
    Filter,
    Hit,
    OrderedRequest,
    SearchRequest,
    SparseVector,
    TimeWindows,
)
from connectors.errors import EngineConfigError
from connectors.retry import deadline_scope
from gateway import PROTOCOL
from gateway.config import Backend, SearchMode, StoreConfig
from gateway.embedders import QueryEmbedder, make_embedder
from gateway.errors import (
    CapabilityNotSupported,
    EmbeddingMismatch,
    InvalidParams,
    ProtocolNotSupported,
)
from gateway.mapping import TIME_FIELDS, UNFILTERABLE_FIELDS, RecordMapper
from gateway.methods import METHOD_CAPABILITY, Capability
from gateway.params import (
    DescribeParams,
    FetchParams,
    PromptOptions,
    RecallParams,
    TimelineParams,
    WhereValue,
)
from gateway.prompt import METHODS, STYLES, check_options, render, wanted
from gateway.records import Record, parse_timestamp
from gateway.scopes import LOCAL, Caller, CredentialForwarding, NothingVisible, ScopePolicy

log = logging.getLogger(__name__)

T = TypeVar("T")

EngineObserver = Callable[[str, str, float, str | None], None]
"""(store, operation, seconds, error kind or None): the metrics module registers one."""


class _MatchesNothing(Exception):
    """A `where` key the mapping does not expose: the answer is empty, no engine call needed."""


class Store:
    """One A2M store. Build with a connector; call start() before serving."""

    def __init__(
        self,
        name: str,
        config: StoreConfig,
        connector: Connector,
        *,
        server_name: str = "a2m-gateway",
        default_timeout_ms: int = 10_000,
        engine_observers: list[EngineObserver] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.connector = connector
        self.mapper = RecordMapper(config.mapping)
        self.scope = ScopePolicy(config)
        self.embedder: QueryEmbedder | None = make_embedder(config.search.embedder)
        self._sparse_encoder: Any = None
        if config.backend is Backend.QDRANT and config.search.sparse_vector:
            from gateway.embedders.lexical import LexicalSparseEncoder

            self._sparse_encoder = LexicalSparseEncoder(analyzer=config.search.sparse_analyzer)
        self._server_name = server_name
        self._timeout_s = (config.request_timeout_ms or default_timeout_ms) / 1000.0
        self.info: EngineInfo | None = None
        self.capabilities: list[Capability] = [Capability.CORE]
        self._engine_observers = engine_observers or []
        self._open_lock = asyncio.Lock()

    @property
    def started(self) -> bool:
        return self.info is not None

    async def ensure_started(self) -> None:
        """Open the store on first use, so a gateway can boot while an engine is still down.

        Raises:
            connectors.errors.ConnectorError: the engine or index is not usable yet.
        """
        if self.info is not None:
            return
        async with self._open_lock:
            if self.info is None:
                if self.config.demo is not None:
                    # Once per process (in memory) or data directory; embedding the corpus
                    # may take longer than one request is allowed: not under its deadline.
                    from gateway.demo import ensure_demo_index

                    indexed = await ensure_demo_index(self.config, self.connector)
                    if indexed:
                        log.info("demo store %s: indexed %d chunks", self.name, indexed)
                async with deadline_scope(self._timeout_s):
                    await self.start()

    async def start(self) -> None:
        """Open the engine, check the embedder's width against it, fix capabilities.

        Raises:
            connectors.errors.ConnectorError: the engine or index is not usable.
        """
        if self.config.scope.forward_credential and not isinstance(
            self.connector, CredentialForwarding
        ):
            # Reading with the gateway's own rights would bypass the engine's document security.
            raise EngineConfigError(
                f"stores.{self.name}.scope.forward_credential: this connector cannot send "
                "the caller's credential to the engine"
            )
        info = await self.connector.open()
        width = self.embedder.dimensions if self.embedder is not None else None
        stored = info.vectors.dimensions if info.vectors is not None else None
        if width is not None and stored is not None and width != stored:
            # Every text-only dense query would fail; say so at start, not per call.
            raise EngineConfigError(
                f"stores.{self.name}.search.embedder makes {width} dimensions; "
                f"the index's vectors have {stored}"
            )
        self.info = info
        self.capabilities = self._capabilities(self.info)

    async def close(self) -> None:
        await self.connector.close()
        if self.embedder is not None:
            await self.embedder.aclose()

    # -- describe -------------------------------------------------------------

    def _capabilities(self, info: EngineInfo) -> list[Capability]:
        caps = [Capability.CORE]
        m = self.config.mapping
        if m.uri:
            caps.append(Capability.EXTERNAL)
        if m.key:
            caps.append(Capability.KEYS)
        if info.vectors is not None:
            caps.append(Capability.EMBEDDINGS)
        caps.append(Capability.PROMPT)
        return caps

    def declares(self, cap: Capability) -> bool:
        return cap in self.capabilities

    async def _engine(self, operation: str, call: Awaitable[T]) -> T:
        start = time.perf_counter()
        error: str | None = None
        try:
            return await call
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            for observe in self._engine_observers:
                observe(self.name, operation, time.perf_counter() - start, error)

    def describe(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        """The memory/describe result, built from what the engine really holds.

        `scopes` depends on the caller: it is declared only where it is true for
        this transport and principal (gateway.scopes).

        Raises:
            ProtocolNotSupported: the client asked for another protocol version.
        """
        if params is not None and params.protocol is not None and params.protocol != PROTOCOL:
            raise ProtocolNotSupported(
                f"Protocol {params.protocol!r} is not supported; this server speaks {PROTOCOL}",
                data={"supported": [PROTOCOL]},
            )
        if params is not None and params.owner is not None and self.scope.declared(caller):
            # describe reports no counts to scope, but an owner the caller may not act
            # for is refused here as on every other method (-32005).
            with contextlib.suppress(NothingVisible):
                self.scope.conditions(caller, params.owner)
        lim = self.config.limits
        methods = [m for m, cap in METHOD_CAPABILITY.items() if cap in self.capabilities]
        capabilities = [c.value for c in self.capabilities]
        if self.scope.declared(caller):
            at = capabilities.index("prompt") if "prompt" in capabilities else len(capabilities)
            capabilities.insert(at, Capability.SCOPES.value)
        result: dict[str, Any] = {
            "protocol": PROTOCOL,
            "name": self.name,
            "capabilities": capabilities,
            "methods": methods,
            "read_only": True,
            "limits": {
                "max_recall_limit": lim.max_recall_limit,
                "max_query_length": lim.max_query_length,
                "max_where_keys": lim.max_where_keys,
                "max_where_values": lim.max_where_values,
            },
        }
        if self.config.description:
            result["description"] = self.config.description
        if self.info is not None and self.info.vectors is not None:
            v = self.info.vectors
            result["embeddings"] = {
                "dimensions": v.dimensions,
                "metric": v.metric,
                "metrics": list(v.metrics),
                "model": self.embedder.model_name if self.embedder else None,
            }
        if Capability.PROMPT in self.capabilities:
            result["prompt"] = {
                "styles": list(STYLES),
                "methods": list(METHODS),
                "model": None,
                "max_budget": lim.max_prompt_budget,
            }
        result["search"] = {"mode": self.config.search.mode.value, "server": self._server_name}
        return result

    # -- shared checks ----------------------------------------------------------

    def _limit(self, limit: int | None, default: int) -> int:
        lim = self.config.limits.max_recall_limit
        if limit is None:
            return default
        if limit == 0:
            # DECISIONS.md §2: 0 is "as many as the store allows"; the canonical client and
            # its adapters send it to mean "all".
            return lim
        if limit < 0 or limit > lim:
            raise InvalidParams(f"limit must be between 0 and max_recall_limit ({lim})")
        return limit

    def _gate(self, params: RecallParams | TimelineParams) -> None:
        if params.tier is not None:
            raise CapabilityNotSupported(
                "Server does not implement the 'tiers' capability (tier was given)"
            )
        if params.key_prefix is not None and not self.declares(Capability.KEYS):
            raise CapabilityNotSupported(
                "Server does not implement the 'keys' capability (key_prefix was given)"
            )

    def _filter(self, where: dict[str, WhereValue] | None, key_prefix: str | None) -> Filter:
        lim = self.config.limits
        must: list[Condition] = []
        times: list[TimeWindows] = []
        if where:
            if len(where) > lim.max_where_keys:
                raise InvalidParams(f"where has more than {lim.max_where_keys} keys")
            unexposed = False
            for name, value in where.items():
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
            if unexposed:
                raise _MatchesNothing
        prefix: tuple[str, str] | None = None
        if key_prefix is not None:
            if len(key_prefix) > lim.max_key_length:
                raise InvalidParams(f"key_prefix is longer than {lim.max_key_length}")
            assert self.config.mapping.key is not None  # keys declared only when mapped
            prefix = (self.config.mapping.key, key_prefix)
        return Filter(must=tuple(must), key_prefix=prefix, times=tuple(times))

    @staticmethod
    def _exact_where(records: list[Record], where: dict[str, WhereValue] | None) -> list[Record]:
        """Check `where`'s string equalities on the mapped records.

        An engine may only approximate them: content, and any analysed text field
        without an exact sub-field, is matched as a phrase. A2M's where is equality,
        so what the engine let through is checked here (arrays match any element).
        """
        if not where:
            return records
        checks = []
        for name, value in where.items():
            if name in TIME_FIELDS:
                continue  # millisecond windows are exact already
            wanted = {
                v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)
            }
            if wanted:
                checks.append((name, wanted))
        if not checks:
            return records

        def holds(record: Record, name: str, wanted: set[str]) -> bool:
            if name in _RECORD_FIELDS:
                value: Any = getattr(record, name)
            else:
                value = (record.metadata or {}).get(name)
            values = value if isinstance(value, list) else [value]
            # Non-string values (numbers, booleans) were matched by the engine exactly.
            return any(not isinstance(v, str) or v in wanted for v in values if v is not None)

        return [r for r in records if all(holds(r, n, w) for n, w in checks)]

    def _read_filter(
        self,
        where: dict[str, WhereValue] | None,
        key_prefix: str | None,
        caller: Caller,
        owner: str | None,
    ) -> Filter | None:
        """The caller's `where` and `key_prefix`, ANDed with its scope; None if nothing can match.

        `where` is checked first, so a bad request gets the same answer whoever sends it.

        Raises:
            InvalidParams: a bad `where` or `key_prefix`.
            ScopeDenied: see ScopePolicy.conditions.
        """
        try:
            flt: Filter | None = self._filter(where, key_prefix)
        except _MatchesNothing:
            flt = None
        try:
            scope = self.scope.conditions(caller, owner)
        except NothingVisible:
            return None
        if flt is None:
            return None
        return dataclasses.replace(flt, must=(*scope, *flt.must)) if scope else flt

    def _connector(self, caller: Caller) -> Connector:
        """The connector, or a view of it that sends the caller's credential (forwarding)."""
        authorization = self.scope.engine_authorization(caller)
        if authorization is None:
            return self.connector
        assert isinstance(self.connector, CredentialForwarding)  # checked at start
        return self.connector.for_caller(authorization)

    def _check_prompt(self, params: RecallParams | TimelineParams) -> PromptOptions | None:
        options = params.prompt_options()
        if options is not None:
            check_options(options, self.config.limits.max_prompt_budget)
        return options

    def _records(self, hits: list[Hit], with_embedding: bool) -> list[Record]:
        return [self.mapper.to_record(h, with_embedding=with_embedding) for h in hits]

    @staticmethod
    def _result(
        records: list[Record], options: PromptOptions | None, *, prefer_newest: bool = False
    ) -> dict[str, Any]:
        result: dict[str, Any] = {"records": [r.to_wire() for r in records]}
        if wanted(options):
            assert options is not None
            rendered = render(records, options, prefer_newest=prefer_newest)
            result["prompt"] = rendered.text
            result["prompt_ids"] = rendered.ids
        return result

    # -- recall -------------------------------------------------------------------

    async def recall(self, params: RecallParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/recall: engine-ranked records, scores in [0, 1] descending.

        Raises:
            InvalidParams, CapabilityNotSupported, EmbeddingMismatch, ScopeDenied,
            ConnectorError.
        """
        self._gate(params)
        lim = self.config.limits
        limit = self._limit(params.limit, lim.default_recall_limit)
        text = (params.query or "").strip()
        if len(params.query or "") > lim.max_query_length:
            raise InvalidParams(f"query is longer than max_query_length ({lim.max_query_length})")
        vector = params.embedding
        if vector is not None:
            self._check_vector(vector)
        options = self._check_prompt(params)
        flt = self._read_filter(params.where, params.key_prefix, caller, params.owner)
        if flt is None:
            return self._result([], options)
        connector = self._connector(caller)

        async with deadline_scope(self._timeout_s):
            if not text and vector is None:
                hits = await self._engine(
                    "ordered",
                    connector.ordered(
                        OrderedRequest(limit=limit, filter=flt, with_vectors=params.embeddings)
                    ),
                )
                # No query: recency order; the score states that rank, nothing more.
                for rank, hit in enumerate(hits):
                    hit.score = round(1.0 / (1 + rank), 6)
            else:
                request = await self._search_request(text, vector, flt, limit, params.embeddings)
                if request is None:
                    return self._result([], options)
                hits = await self._engine("search", connector.search(request))

        records = self._exact_where(self._records(hits, params.embeddings), params.where)
        for r in records:
            r.score = _clamp(r.score)
        records.sort(key=lambda r: -(r.score or 0.0))
        if params.min_score is not None:
            records = [r for r in records if (r.score or 0.0) >= params.min_score]
        return self._result(records[:limit], options)

    def _check_vector(self, vector: list[float]) -> None:
        if not self.declares(Capability.EMBEDDINGS):
            raise CapabilityNotSupported(
                "Server does not implement the 'embeddings' capability (embedding was given)"
            )
        assert self.info is not None
        assert self.info.vectors is not None
        dims = self.info.vectors.dimensions
        if dims is not None and len(vector) != dims:
            raise EmbeddingMismatch(
                f"embedding has {len(vector)} dimensions; this store's vectors have {dims}",
                data={"expected": dims, "got": len(vector)},
            )
        if not all(math.isfinite(x) for x in vector):
            raise InvalidParams("embedding must contain finite numbers only")
        # Found by fuzzing: engines hold 32-bit floats, and refuse (or overflow on) a query
        # whose values or squared norm leave that range, or a zero vector under cosine.
        f32 = array("f", vector)
        square = math.fsum(array("f", (x * x for x in f32)))  # squares as the engine rounds them
        if not all(math.isfinite(x) for x in f32) or not square <= _F32_MAX:
            raise InvalidParams("embedding is too large for 32-bit float vectors")
        if square == 0.0 and self.info.vectors.metric == "cosine":
            raise InvalidParams("embedding has zero length: cosine gives it no direction")

    async def _search_request(
        self,
        text: str,
        vector: list[float] | None,
        flt: Filter,
        limit: int,
        with_vectors: bool,
    ) -> SearchRequest | None:
        s = self.config.search
        lexical = bool(text) and (
            s.mode in (SearchMode.LEXICAL, SearchMode.HYBRID) or vector is not None
        )
        if self.info is not None and not self.info.lexical:
            lexical = False
        dense: list[float] | None = vector
        if dense is None and text and s.mode in (SearchMode.DENSE, SearchMode.HYBRID):
            assert self.embedder is not None  # config validation requires one for these modes
            dense = await self.embedder.embed_query(text)
            self._check_vector(dense)
        sparse: SparseVector | None = None
        lex_text: str | None = None
        if lexical:
            if self._sparse_encoder is not None:
                sparse = self._sparse_encoder.encode_query(text)
                if not sparse.indices:
                    sparse = None
            else:
                lex_text = text
        if dense is None and sparse is None and lex_text is None:
            return None  # nothing rankable in the query (e.g. only stopwords or punctuation)
        return SearchRequest(
            limit=limit,
            filter=flt,
            text=lex_text,
            sparse=sparse,
            dense=dense,
            with_vectors=with_vectors,
            candidates=max(s.candidates, limit),
            rrf_k=s.rrf_k,
            lexical_weight=s.lexical_weight,
            dense_weight=s.dense_weight,
        )

    # -- timeline -------------------------------------------------------------------

    async def timeline(self, params: TimelineParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/timeline: ascending creation order; with limit, the newest `limit` records.

        Never implemented through recall (§4.4): it asks the connector for an
        ordered read, never a ranked one.

        Raises:
            InvalidParams, CapabilityNotSupported, ScopeDenied, ConnectorError.
        """
        self._gate(params)
        limit = self._limit(params.limit, self.config.limits.default_timeline_limit)
        options = self._check_prompt(params)
        flt = self._read_filter(params.where, params.key_prefix, caller, params.owner)
        if flt is None:
            return self._result([], options)
        async with deadline_scope(self._timeout_s):
            hits = await self._engine(
                "ordered",
                self._connector(caller).ordered(
                    OrderedRequest(
                        limit=limit, filter=flt, newest_first=True, with_vectors=params.embeddings
                    )
                ),
            )
        hits.reverse()
        for h in hits:
            h.score = None
        records = self._exact_where(self._records(hits, params.embeddings), params.where)
        return self._result(records, options, prefer_newest=True)

    # -- fetch ------------------------------------------------------------------------

    async def fetch(self, params: FetchParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/fetch: the record at a key, or null (also when the caller may not see it).

        Raises:
            InvalidParams, ScopeDenied, ConnectorError.
        """
        key_field = self.config.mapping.key
        assert key_field is not None  # the dispatcher gates fetch on the keys capability
        if len(params.key) > self.config.limits.max_key_length:
            raise InvalidParams(f"key is longer than {self.config.limits.max_key_length}")
        try:
            scope = self.scope.conditions(caller, params.owner)
        except NothingVisible:
            return {"record": None}
        async with deadline_scope(self._timeout_s):
            hit = await self._engine(
                "fetch",
                self._connector(caller).fetch(
                    Filter(must=(*scope, Condition(field=key_field, values=(params.key,)))),
                    with_vectors=params.embeddings,
                ),
            )
        if hit is None:
            return {"record": None}
        hit.score = None
        return {"record": self.mapper.to_record(hit, with_embedding=params.embeddings).to_wire()}

    async def ready(self) -> bool:
        return await self.connector.ping()

    async def sample(self, n: int = 3) -> list[dict[str, Any]]:
        """The newest n mapped records: the onboarding preview of `a2m-gateway check`."""
        async with deadline_scope(self._timeout_s):
            hits = await self.connector.ordered(OrderedRequest(limit=n))
        for h in hits:
            h.score = None
        return [r.to_wire() for r in self._records(hits, False)]


_RECORD_FIELDS = frozenset({"id", "content", "key", "group", "role", "uri", "media_type", "owner"})


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
_F32_MAX = 3.4028234663852886e38


def _engine_time(ts: datetime) -> str:
    """An engine-facing UTC bound with a four-digit year, whatever the platform's strftime.

    Found by fuzzing: strftime("%Y") writes year 999 as "999", which no engine parses
    (-32603 on `where: {created_at: "0999-01-01T00:00:00Z"}`).
    """
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _clamp(score: float | None) -> float:
    if score is None or not math.isfinite(score):
        return 0.0
    return min(1.0, max(0.0, score))
