"""Store: one configured index behind one A2M endpoint.

A small orchestrator: the StoreProfile says what the store declares (and gates
capabilities), the QueryPlanner turns params into an engine request, the
connector runs it under the request's deadline, and the ResultShaper turns the
hits into the wire result. Transport- and JSON-RPC-agnostic: it raises A2M or
connector errors, which the dispatcher maps to the wire.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from connectors.base import Connector, EngineInfo, Hit, OrderedRequest
from connectors.errors import EngineConfigError
from connectors.retry import deadline_scope
from gateway.a2m.methods import Capability
from gateway.a2m.params import DescribeParams, FetchParams, RecallParams, TimelineParams
from gateway.config import StoreConfig
from gateway.embedders import QueryEmbedder, make_embedder
from gateway.resilience import EngineGuard
from gateway.security.scopes import LOCAL, Caller, CredentialForwarding, ScopePolicy
from gateway.store.mapping import RecordMapper
from gateway.store.paging import EngineObserver, RecordPager, off_loop_if_large
from gateway.store.planner import MatchesNothing, QueryPlanner, check_vector
from gateway.store.profile import StoreProfile
from gateway.store.query_vectors import check_width, embed_query
from gateway.store.shaper import ResultShaper

log = logging.getLogger(__name__)

Bootstrap = Callable[[], Awaitable[None]]
"""Run once before the engine is opened (the demo store indexes its corpus)."""


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
        bootstrap: Bootstrap | None = None,
        guard: EngineGuard | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.connector = connector
        self.mapper = RecordMapper(config.mapping)
        self.scope = ScopePolicy(config)
        self.embedder: QueryEmbedder | None = make_embedder(config.search.embedder)
        self.profile = StoreProfile(name, config, self.scope, self.embedder, server_name)
        self.planner = QueryPlanner(config, self.mapper, self.scope)
        self.shaper = ResultShaper(self.mapper, config.limits.max_prompt_budget)
        self._timeout_s = (config.request_timeout_ms or default_timeout_ms) / 1000.0
        # Every engine call of this store, opening included, passes its breaker and limit.
        self.pager = RecordPager(
            name,
            self.planner,
            self.shaper,
            guard or EngineGuard(name, config.resilience, config.connection.pool_maxsize),
            engine_observers,
        )
        # While the breaker is open, the engine's own ping can end the wait early.
        self.guard.watch(connector.ping)
        self._bootstrap = bootstrap
        self._open_lock = asyncio.Lock()

    @property
    def guard(self) -> EngineGuard:
        """The store's breaker and in-flight limit; one, held by its pager."""
        return self.pager.guard

    @guard.setter
    def guard(self, value: EngineGuard) -> None:
        self.pager.guard = value

    @property
    def info(self) -> EngineInfo | None:
        return self.profile.info

    @property
    def capabilities(self) -> list[Capability]:
        return self.profile.capabilities

    @property
    def started(self) -> bool:
        return self.profile.info is not None

    def declares(self, cap: Capability) -> bool:
        return self.profile.declares(cap)

    async def ensure_started(self) -> None:
        """Open the store on first use, so a gateway can boot while an engine is still down.

        Raises:
            connectors.errors.ConnectorError: the engine or index is not usable yet.
        """
        if self.started:
            return
        async with self._open_lock:
            if not self.started:
                if self._bootstrap is not None:
                    # Indexing the demo (embedding its corpus) may take longer than one
                    # request is allowed: not under its deadline.
                    await self._bootstrap()
                    self._bootstrap = None
                async with deadline_scope(self._timeout_s):
                    await self.start()

    async def start(self) -> None:
        """Run the bootstrap, open the engine, fix capabilities.

        Raises:
            connectors.errors.ConnectorError: the engine or index is not usable, or the
                server's own embedder gives vectors of another width than the index's.
        """
        if self.config.scope.forward_credential and not isinstance(
            self.connector, CredentialForwarding
        ):
            # Reading with the gateway's own rights would bypass the engine's document security.
            raise EngineConfigError(
                f"stores.{self.name}.scope.forward_credential: this connector cannot send "
                "the caller's credential to the engine"
            )
        if self._bootstrap is not None:  # start() called directly (tests, check)
            await self._bootstrap()
            self._bootstrap = None
        info = await self.guard.call(self.connector.open)
        check_width(self.name, self.embedder, info)
        self.profile.learn(info)

    async def close(self) -> None:
        self.guard.stop_watching()
        await self.connector.close()
        if self.embedder is not None:
            await self.embedder.aclose()

    def _connector(self, caller: Caller) -> Connector:
        """The connector, or a view of it that sends the caller's credential (forwarding)."""
        authorization = self.scope.engine_authorization(caller)
        if authorization is None:
            return self.connector
        assert isinstance(self.connector, CredentialForwarding)  # checked at start
        return self.connector.for_caller(authorization)

    def describe(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        """memory/describe (see StoreProfile.describe)."""
        return self.profile.describe(params, caller)

    # -- recall -------------------------------------------------------------------

    async def recall(self, params: RecallParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/recall: engine-ranked records, scores in [0, 1] descending.

        Raises:
            InvalidParams, CapabilityNotSupported, EmbeddingMismatch, ScopeDenied,
            ConnectorError, EmbedderUnavailable.
        """
        self.profile.gate_params(params)
        plan = self.planner
        limit = plan.limit(params.limit, self.config.limits.default_recall_limit)
        text = plan.query_text(params.query)
        if params.embedding is not None:
            check_vector(params.embedding, self.info)
        options = self.shaper.prompt_options(params.prompt_options())
        try:
            flt = plan.read_filter(params.where, params.key_prefix, caller, params.owner)
        except MatchesNothing:
            return self.shaper.result([], options)
        connector = self._connector(caller)

        async with deadline_scope(self._timeout_s):
            if not text and params.embedding is None:
                records = await self.pager.ordered(
                    connector,
                    flt,
                    params.where,
                    limit,
                    newest_first=True,
                    with_embedding=params.embeddings,
                )
                # No query: recency order; the score states that rank, nothing more.
                for rank, r in enumerate(records):
                    r.score = round(1.0 / (1 + rank), 6)
            else:
                dense = params.embedding
                if plan.needs_embedding(text, dense):
                    dense = await embed_query(self.name, self.embedder, text, self.info)
                try:
                    probe = plan.search_request(
                        text,
                        dense,
                        flt,
                        limit,
                        info=self.info,
                        given_vector=params.embedding is not None,
                        with_vectors=params.embeddings,
                    )
                except MatchesNothing:
                    return self.shaper.result([], options)
                records = await self.pager.search(
                    connector, probe, params.where, limit, with_embedding=params.embeddings
                )
            ranked = self.shaper.ranked(records, params.min_score, limit)
            return await off_loop_if_large(len(ranked), lambda: self.shaper.result(ranked, options))

    # -- timeline -------------------------------------------------------------------

    async def timeline(self, params: TimelineParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/timeline: ascending creation order; with limit, the newest `limit` records.

        Never implemented through recall (§4.4): it asks the connector for an
        ordered read, never a ranked one.

        Raises:
            InvalidParams, CapabilityNotSupported, ScopeDenied, ConnectorError.
        """
        self.profile.gate_params(params)
        limit = self.planner.limit(params.limit, self.config.limits.default_timeline_limit)
        options = self.shaper.prompt_options(params.prompt_options())
        try:
            flt = self.planner.read_filter(params.where, params.key_prefix, caller, params.owner)
        except MatchesNothing:
            return self.shaper.result([], options)
        async with deadline_scope(self._timeout_s):
            records = await self.pager.ordered(
                self._connector(caller),
                flt,
                params.where,
                limit,
                newest_first=True,
                with_embedding=params.embeddings,
            )
            records.reverse()
            return await off_loop_if_large(
                len(records), lambda: self.shaper.result(records, options, prefer_newest=True)
            )

    # -- fetch ------------------------------------------------------------------------

    async def fetch(self, params: FetchParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/fetch: the record at a key, or null (also when the caller may not see it).

        Raises:
            InvalidParams, ScopeDenied, ConnectorError.
        """
        try:
            flt = self.planner.key_filter(params.key, caller, params.owner)
        except MatchesNothing:
            return {"record": None}
        async with deadline_scope(self._timeout_s):
            hit = await self.pager.engine(
                "fetch", partial(self._connector(caller).fetch, flt, with_vectors=params.embeddings)
            )
        if hit is None:
            return {"record": None}
        hit.score = None
        return {"record": self.mapper.to_record(hit, with_embedding=params.embeddings).to_wire()}

    async def ready(self) -> bool:
        """The engine answers a ping now; False without asking while the breaker is open."""
        return await self.guard.ping(self.connector.ping)

    async def preview(self, n: int, caller: Caller = LOCAL) -> list[dict[str, Any]]:
        """The newest n documents as the engine holds them, each beside the record it becomes.

        The mapping preview of the try page: the document is what the connector read (the
        mapped fields only, as stored), under the caller's scope exactly as a timeline read.

        Raises:
            ScopeDenied, ConnectorError.
        """
        try:
            flt = self.planner.read_filter(None, None, caller, None)
        except MatchesNothing:
            return []
        request = OrderedRequest(limit=n, filter=flt)
        async with deadline_scope(self._timeout_s):
            hits = await self.pager.engine(
                "preview", partial(self._connector(caller).ordered, request)
            )
        documents = [{"id": h.id, "source": copy.deepcopy(h.source)} for h in hits]
        records = self.shaper.records(hits, None, with_embedding=False)
        return [
            {"document": d, "record": r.to_wire()} for d, r in zip(documents, records, strict=True)
        ]

    async def sample(self, n: int = 3) -> list[dict[str, Any]]:
        """The newest n mapped records: the onboarding preview of `a2m-gateway check`."""
        async with deadline_scope(self._timeout_s):
            hits: list[Hit] = await self.connector.ordered(OrderedRequest(limit=n))
        for h in hits:
            h.score = None
        return [r.to_wire() for r in self.shaper.records(hits, None, with_embedding=False)]
