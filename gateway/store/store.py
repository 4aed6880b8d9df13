"""Store: one configured index behind one A2M endpoint.

A source behind the front (gateway.front): the StoreProfile says what the store
declares, the QueryPlanner turns params into an engine request, the pager runs it
through the guard under the request's deadline, and the ResultShaper turns the
hits into records; opening (gateway.store.opening) and onboarding samples
(gateway.store.sampling) live beside it. The front gates, limits and shapes; the
store answers records.
Transport- and JSON-RPC-agnostic: it raises A2M or connector errors, which the
dispatcher maps to the wire.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

from connectors.base import Connector, EngineInfo
from connectors.retry import deadline_scope
from gateway.a2m.methods import Capability
from gateway.a2m.params import DescribeParams, FetchParams, RecallParams, TimelineParams
from gateway.a2m.records import Record
from gateway.config import StoreConfig
from gateway.embedders import QueryEmbedder, make_embedder
from gateway.front.front import Front
from gateway.front.profile import Profile
from gateway.front.source import Answer
from gateway.resilience import EngineGuard
from gateway.security.scopes import LOCAL, Caller, CredentialForwarding, NothingVisible, ScopePolicy
from gateway.stages.pipeline import Stages
from gateway.store import sampling
from gateway.store.connector_spec import engine_passages
from gateway.store.mapping import RecordMapper
from gateway.store.opening import Bootstrap, Opener
from gateway.store.paging import EngineObserver, RecordPager
from gateway.store.planner import MatchesNothing, QueryPlanner
from gateway.store.profile import StoreProfile
from gateway.store.query_vectors import check_vector, embed_query
from gateway.store.shaper import ResultShaper

log = logging.getLogger(__name__)


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
        self.declared = StoreProfile(name, config, self.embedder, server_name)
        self.limits = self.declared.limits
        self.front = Front(self)
        self.planner = QueryPlanner(config, self.mapper, self.scope)
        self.shaper = ResultShaper(self.mapper)
        self.stages = Stages(config.search, engine_passages=engine_passages(config) is not None)
        self.timeout_s = (config.request_timeout_ms or default_timeout_ms) / 1000.0
        # Every engine call of this store, opening included, passes its breaker and limit.
        self.pager = RecordPager(
            name,
            self.shaper,
            guard or EngineGuard(name, config.resilience, config.connection.pool_maxsize),
            engine_observers,
            where_candidates=config.limits.max_where_candidates,
        )
        # While the breaker is open, the engine's own ping can end the wait early.
        self.guard.watch(connector.ping)
        self._opener = Opener(bootstrap)

    @property
    def guard(self) -> EngineGuard:
        """The store's breaker and in-flight limit; one, held by its pager."""
        return self.pager.guard

    @guard.setter
    def guard(self, value: EngineGuard) -> None:
        self.pager.guard = value

    @property
    def info(self) -> EngineInfo | None:
        return self.declared.info

    @property
    def capabilities(self) -> list[Capability]:
        return self.declared.capabilities

    @property
    def started(self) -> bool:
        return self.declared.info is not None

    async def ensure_started(self) -> None:
        """Open the store on first use (see Opener.ensure)."""
        if not self.started:
            await self._opener.ensure(self)

    async def start(self) -> None:
        """Run the bootstrap, open the engine, fix capabilities (see Opener.open)."""
        await self._opener.open(self)

    async def close(self) -> None:
        self.guard.stop_watching()
        await self.connector.close()
        if self.embedder is not None:
            await self.embedder.aclose()

    def connector_for(self, caller: Caller) -> Connector:
        """The connector, or a view of it that sends the caller's credential (forwarding)."""
        authorization = self.scope.engine_authorization(caller)
        if authorization is None:
            return self.connector
        assert isinstance(self.connector, CredentialForwarding)  # checked at start
        return self.connector.for_caller(authorization)

    # -- the source the front stands before ------------------------------------------

    def profile(self) -> Profile:
        return self.declared.value

    def admits(self, caller: Caller) -> bool:
        return self.scope.may_use(caller)

    def withheld(self, caller: Caller) -> frozenset[str]:
        return frozenset()

    def scoped(self, caller: Caller) -> bool:
        return self.scope.declared(caller)

    def check_owner(self, caller: Caller, owner: str) -> None:
        """Raises: ScopeDenied: an owner the caller may not act for."""
        if self.scope.declared(caller):
            with contextlib.suppress(NothingVisible):
                self.scope.conditions(caller, owner)

    async def read_recall(self, params: RecallParams, limit: int, caller: Caller) -> Answer:
        """Engine-ranked records (scores in [0, 1] descending); no query: newest first.

        Raises:
            InvalidParams, EmbeddingMismatch, ScopeDenied, ConnectorError, GuardRefusal,
            EmbedderUnavailable.
        """
        plan = self.planner
        text = plan.query_text(params.query)
        if params.embedding is not None:
            check_vector(params.embedding, self.info)
        try:
            flt = plan.read_filter(params.where, params.key_prefix, caller, params.owner)
        except MatchesNothing:
            return Answer([])
        connector = self.connector_for(caller)
        async with deadline_scope(self.timeout_s):
            if not text and params.embedding is None:
                read = plan.ordered_plan(flt, params.where, limit, with_vectors=params.embeddings)
                return Answer(await self.pager.read(connector, read))
            dense = params.embedding
            if plan.needs_embedding(text, dense):
                dense = await embed_query(self.name, self.embedder, text, self.info)
            search = partial(
                plan.search_plan,
                text,
                dense,
                where=params.where,
                info=self.info,
                given_vector=params.embedding is not None,
                with_vectors=params.embeddings,
            )
            try:
                first = search(flt, limit=limit)
            except MatchesNothing:
                return Answer([])

            async def page(size: int, without: Sequence[str] = ()) -> list[Record]:
                if size == limit and not without:
                    return await self.pager.read(connector, first)
                read = search(plan.without_groups(flt, without), limit=size)
                return await self.pager.read(connector, read)

            return Answer(await self.stages.recall(page, limit, text))

    async def read_timeline(self, params: TimelineParams, limit: int, caller: Caller) -> Answer:
        """Ascending creation order, the newest `limit`: an ordered read, never a search (§4.4).

        Raises:
            InvalidParams, ScopeDenied, ConnectorError, GuardRefusal.
        """
        try:
            flt = self.planner.read_filter(params.where, params.key_prefix, caller, params.owner)
        except MatchesNothing:
            return Answer([])
        read = self.planner.ordered_plan(flt, params.where, limit, with_vectors=params.embeddings)
        async with deadline_scope(self.timeout_s):
            records = await self.pager.read(self.connector_for(caller), read)
        records.reverse()
        return Answer(records)

    async def read_fetch(self, params: FetchParams, caller: Caller) -> Answer:
        """The record at a key (none when the caller may not see it).

        Raises:
            InvalidParams, ScopeDenied, ConnectorError, GuardRefusal.
        """
        try:
            flt = self.planner.key_filter(params.key, caller, params.owner)
        except MatchesNothing:
            return Answer([])
        async with deadline_scope(self.timeout_s):
            hit = await self.pager.engine(
                "fetch",
                partial(self.connector_for(caller).fetch, flt, with_vectors=params.embeddings),
            )
        if hit is None:
            return Answer([])
        return Answer([self.mapper.to_record(hit, with_embedding=params.embeddings, ranked=False)])

    # -- the reads as the front answers them (an application embedding the store) ------

    def describe(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        """memory/describe (see gateway.front.Front.describe_now)."""
        return self.front.describe_now(params, caller)

    async def recall(self, params: RecallParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/recall through the front (gate, limits, shaping)."""
        return await self.front.recall(params, caller)

    async def timeline(self, params: TimelineParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/timeline through the front."""
        return await self.front.timeline(params, caller)

    async def fetch(self, params: FetchParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/fetch through the front."""
        return await self.front.fetch(params, caller)

    async def ready(self) -> bool:
        """The engine answers a ping now; False without asking while the breaker is open."""
        return await self.guard.ping(self.connector.ping)

    async def preview(self, n: int, caller: Caller = LOCAL) -> list[dict[str, Any]]:
        """The try page's mapping preview (gateway.store.sampling.preview)."""
        return await sampling.preview(self, n, caller)
