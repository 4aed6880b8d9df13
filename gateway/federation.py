"""Federation: several stores answering as one A2M store.

A federation sits on its members' public Store methods and passes the caller
on, so every member applies its own scope filter, mapping, limits and
deadline; the federation's deadline bounds them all. It adds:

- ids: a member's record id ``x`` is ``<member>:x`` here (store names hold no
  ``:``), so ``where: {id: ...}`` routes back to the member that owns it;
- recall: concurrent fan-out, then one ranking (:mod:`gateway.federation_fusion`):
  weighted reciprocal rank fusion, ``fusion: score`` a merge by weighted member
  score, or ``fusion: shards`` as one index holding every member's records (deep
  calls, lexical scores calibrated per member, hybrid legs fanned out and merged
  separately, then fused); without a query, the members' recency orders are
  merged by ``created_at``;
- timeline: the members' ascending streams merged by ``created_at``;
- describe: what every member can do (A2M §3.7), and the members it spans;
- partial failure: a member that is down or past the deadline is left out and
  named in the result's ``left_out`` field; when every member fails the call
  answers the engine-trouble error.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from connectors.errors import ConnectorError, EngineTimeout, EngineUnavailable
from gateway import PROTOCOL
from gateway.config import FederationConfig, SearchMode
from gateway.embedders import EmbedderUnavailable
from gateway.errors import (
    A2MError,
    BackendTimeout,
    BackendUnavailable,
    CapabilityNotSupported,
    EngineTrouble,
    InvalidParams,
)
from gateway.federation_fusion import fuse_legs, merge_by_score, merge_calibrated, merge_rrf
from gateway.methods import METHOD_CAPABILITY, Capability
from gateway.params import (
    DescribeParams,
    FetchParams,
    PromptOptions,
    RecallParams,
    TimelineParams,
    WhereValue,
)
from gateway.prompt import check_options, render, wanted
from gateway.records import Record, parse_timestamp
from gateway.resilience import CircuitOpen, Overloaded
from gateway.scopes import LOCAL, Caller
from gateway.store import Store

log = logging.getLogger(__name__)

T = TypeVar("T")

ID_SEPARATOR = ":"

LeftOutObserver = Callable[[str, str, str], None]
"""(federation, member, reason): the metrics module registers one."""


def encode_id(member: str, record_id: str) -> str:
    return f"{member}{ID_SEPARATOR}{record_id}"


def decode_id(value: str) -> tuple[str, str] | None:
    """(member, member's id), or None when the value names no member."""
    member, sep, record_id = value.partition(ID_SEPARATOR)
    return (member, record_id) if sep and member else None


@dataclass(frozen=True, slots=True)
class Member:
    store: Store
    weight: float

    @property
    def name(self) -> str:
        return self.store.name


@dataclass(slots=True)
class _Outcome:
    member: Member
    result: Any = None
    reason: str | None = None
    error: ConnectorError | None = None
    refusal: A2MError | None = None


class Federation:
    """A store to its clients, composed of member stores (see the module docstring)."""

    def __init__(
        self,
        name: str,
        config: FederationConfig,
        members: Sequence[Member],
        *,
        default_timeout_ms: int = 10_000,
        observers: list[LeftOutObserver] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.members = list(members)
        self._deadline_s = (config.deadline_ms or default_timeout_ms) / 1000.0
        self._observers = observers or []

    # -- lifecycle ------------------------------------------------------------

    async def ensure_started(self) -> None:
        """Open the members that can open; at least one must.

        Raises:
            connectors.errors.ConnectorError: no member could be opened.
        """
        if any(m.store.started for m in self.members):
            return  # the others are retried by each call's fan-out
        outcomes = await self._fan_out(
            lambda m: m.store.ensure_started(), self.members, observe=False
        )
        if not any(o.reason is None for o in outcomes):
            raise self._all_failed(outcomes)

    def observe_left_out(self, observer: LeftOutObserver) -> None:
        self._observers.append(observer)

    async def close(self) -> None:
        """Nothing of its own: the gateway closes the member stores."""

    async def ready(self) -> dict[str, bool]:
        """Per member: opened and its engine answers now."""

        async def one(member: Member) -> bool:
            try:
                async with asyncio.timeout(self._deadline_s):
                    await member.store.ensure_started()
                    return await member.store.ready()
            except (ConnectorError, TimeoutError):
                return False

        states = await asyncio.gather(*(one(m) for m in self.members))
        return {m.name: s for m, s in zip(self.members, states, strict=True)}

    @property
    def capabilities(self) -> list[Capability]:
        """What every opened member declares; embeddings only with one model and width."""
        started = [m.store for m in self.members if m.store.started]
        if not started:
            return [Capability.CORE]
        caps = [c for c in started[0].capabilities if all(c in s.capabilities for s in started)]
        if Capability.EMBEDDINGS in caps and self._embeddings(started) is None:
            caps.remove(Capability.EMBEDDINGS)
        return caps

    def declares(self, cap: Capability) -> bool:
        return cap in self.capabilities

    # -- describe -------------------------------------------------------------

    def describe(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        """memory/describe: the intersection of the opened members' describes (§3.7).

        Raises:
            ProtocolNotSupported, ScopeDenied: as a member's describe raises them.
        """
        started = [m for m in self.members if m.store.started]
        docs = [m.store.describe(params, caller) for m in started]
        own = {c.value for c in self.capabilities}
        capabilities = [
            c for c in docs[0]["capabilities"] if all(c in d["capabilities"] for d in docs)
        ]
        # `scopes` is per caller and comes from the members' describes; the rest from ours.
        capabilities = [c for c in capabilities if c in own or c == Capability.SCOPES.value]
        methods = [
            m
            for m, cap in METHOD_CAPABILITY.items()
            if cap.value in own and m in docs[0]["methods"]
        ]
        result: dict[str, Any] = {
            "protocol": PROTOCOL,
            "name": self.name,
            "capabilities": capabilities,
            "methods": methods,
            "read_only": True,
            "limits": {
                key: min(d["limits"][key] for d in docs)
                for key in docs[0]["limits"]
                if all(key in d["limits"] for d in docs)
            },
        }
        if self.config.description:
            result["description"] = self.config.description
        if Capability.EMBEDDINGS.value in capabilities:
            embeddings = self._embeddings([m.store for m in started])
            assert embeddings is not None  # the capability is declared only then
            result["embeddings"] = embeddings
        if Capability.PROMPT.value in capabilities:
            prompt = dict(docs[0]["prompt"])
            prompt["max_budget"] = min(d["prompt"]["max_budget"] for d in docs)
            result["prompt"] = prompt
        result["search"] = {"mode": "federated", "server": docs[0]["search"]["server"]}
        result["members"] = [
            {"store": m.name, "weight": m.weight, "open": m.store.started} for m in self.members
        ]
        return result

    @staticmethod
    def _embeddings(stores: Sequence[Store]) -> dict[str, Any] | None:
        """The shared embeddings block, or None when the members' vectors differ (§3.7)."""
        blocks = []
        for s in stores:
            if s.info is None or s.info.vectors is None:
                return None
            v = s.info.vectors
            blocks.append(
                (v.dimensions, s.embedder.model_name if s.embedder else None, v.metric, v.metrics)
            )
        dims, model, metric, _ = blocks[0]
        if any(b[0] != dims or b[1] != model for b in blocks):
            return None
        metrics = [x for x in blocks[0][3] if all(x in b[3] for b in blocks)]
        if not metrics:
            return None
        if metric not in metrics:
            metric = metrics[0]
        return {"dimensions": dims, "metric": metric, "metrics": metrics, "model": model}

    # -- shared checks ----------------------------------------------------------

    def _limit(self, limit: int | None, default: str) -> int:
        lims = [m.store.config.limits for m in self.members]
        top = min(lim.max_recall_limit for lim in lims)
        if limit is None:
            return min(int(getattr(lim, default)) for lim in lims)
        if limit == 0:
            return top  # DECISIONS.md §2: as many as the store allows
        if limit > top:
            raise InvalidParams(f"limit must be between 0 and max_recall_limit ({top})")
        return limit

    def _gate(self, params: RecallParams | TimelineParams) -> PromptOptions | None:
        if params.tier is not None:
            raise CapabilityNotSupported(
                "Server does not implement the 'tiers' capability (tier was given)"
            )
        if params.key_prefix is not None and not self.declares(Capability.KEYS):
            raise CapabilityNotSupported(
                "Server does not implement the 'keys' capability (key_prefix was given)"
            )
        options = params.prompt_options()
        if options is not None:
            check_options(
                options, min(m.store.config.limits.max_prompt_budget for m in self.members)
            )
        return options

    def _routes(self, where: dict[str, WhereValue] | None) -> list[tuple[Member, Any]]:
        """Each member to ask, with its `where`: ids are routed to the member they name."""
        if not where or "id" not in where:
            return [(m, where) for m in self.members]
        raw = where["id"]
        wanted_ids = raw if isinstance(raw, list) else [raw]
        routes = []
        for m in self.members:
            own = [
                d[1]
                for v in wanted_ids
                if isinstance(v, str) and (d := decode_id(v)) is not None and d[0] == m.name
            ]
            if own:
                routes.append((m, {**where, "id": own if len(own) > 1 else own[0]}))
        return routes

    # -- fan-out -----------------------------------------------------------------

    async def _fan_out(
        self,
        call: Callable[[Member], Awaitable[Any]],
        members: Sequence[Member],
        *,
        observe: bool = True,
    ) -> list[_Outcome]:
        """Run `call` on every member concurrently, each bounded by the federation's deadline.

        A member's engine trouble or overrun becomes a left-out outcome; any other
        error (the caller's bad params, a scope refusal) is the answer.
        """

        async def one(member: Member) -> _Outcome:
            error: ConnectorError
            try:
                async with asyncio.timeout(self._deadline_s):
                    await member.store.ensure_started()
                    return _Outcome(member, result=await call(member))
            except TimeoutError:
                reason, error = EngineTrouble.DEADLINE_EXCEEDED, EngineTimeout("deadline exceeded")
            except EngineTimeout as exc:
                reason, error = EngineTrouble.DEADLINE_EXCEEDED, exc
            except CircuitOpen as exc:
                reason, error = EngineTrouble.CIRCUIT_OPEN, exc
            except Overloaded as exc:
                reason, error = EngineTrouble.OVERLOADED, exc
            except ConnectorError as exc:
                reason, error = EngineTrouble.ENGINE_UNAVAILABLE, exc
            except EmbedderUnavailable as exc:
                # A member that cannot embed the query is left out like an unavailable engine.
                reason = EngineTrouble.ENGINE_UNAVAILABLE
                error = EngineUnavailable(str(exc), exc.retry_after_ms)
            except A2MError as exc:
                # Held, not raised, so the other members finish and no task is orphaned.
                return _Outcome(member, refusal=exc)
            if not observe:
                return _Outcome(member, reason=reason.value, error=error)
            for observer in self._observers:
                observer(self.name, member.name, reason.value)
            log.warning(
                "federation %s: member %s left out (%s)", self.name, member.name, reason.value
            )
            return _Outcome(member, reason=reason.value, error=error)

        outcomes = list(await asyncio.gather(*(one(m) for m in members)))
        for o in outcomes:
            if o.refusal is not None:
                raise o.refusal  # the first member's, in config order
        return outcomes

    @staticmethod
    def _all_failed(outcomes: Sequence[_Outcome]) -> Exception:
        errors = [o.error for o in outcomes if o.error is not None]
        if errors and all(isinstance(e, EngineTimeout) for e in errors):
            return BackendTimeout("No store of this federation answered in time")
        wait = max(
            (e.retry_after_ms for e in errors if isinstance(e, EngineUnavailable)), default=None
        )
        return BackendUnavailable("No store of this federation is available", retry_after_ms=wait)

    def _answered(self, outcomes: list[_Outcome]) -> tuple[list[_Outcome], dict[str, Any]]:
        """The members that answered, and the `left_out` field (absent when none was).

        Raises:
            BackendUnavailable, BackendTimeout: no member answered.
        """
        ok = [o for o in outcomes if o.reason is None]
        if outcomes and not ok:
            raise self._all_failed(outcomes)
        left = [{"member": o.member.name, "reason": o.reason} for o in outcomes if o.reason]
        return ok, ({"left_out": left} if left else {})

    # -- recall ---------------------------------------------------------------------

    async def recall(self, params: RecallParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/recall over every member, fused (`fusion`); scores in [0, 1] descending.

        Raises:
            InvalidParams, CapabilityNotSupported, EmbeddingMismatch, ScopeDenied: from
                the params or a member; BackendUnavailable/BackendTimeout: no member answered.
        """
        options = self._gate(params)
        limit = self._limit(params.limit, "default_recall_limit")
        if params.embedding is not None and not self.declares(Capability.EMBEDDINGS):
            raise CapabilityNotSupported(
                "Server does not implement the 'embeddings' capability (embedding was given)"
            )
        asked = params.model_copy(update={"limit": limit, "prompt": None, "min_score": None})
        routes = dict((m.name, w) for m, w in self._routes(params.where))
        members = [m for m in self.members if m.name in routes]
        call = self._caller(asked, routes, caller)
        if self.config.fusion == "shards" and (params.query or "").strip():
            records, extra = await self._recall_shards(params, asked, routes, members, caller)
        elif self.config.fusion == "shards" and params.embedding is not None:
            deep = asked.model_copy(update={"limit": self._depth(limit)})
            ok, extra = self._answered(
                await self._fan_out(self._caller(deep, routes, caller), members)
            )
            records = merge_by_score(self._ranked(ok), limit)
        else:
            ok, extra = self._answered(await self._fan_out(call, members))
            ranked = self._ranked(ok)
            if not (params.query or "").strip() and params.embedding is None:
                records = _newest_first([r for rs, _ in ranked for r in rs])[:limit]
                for rank, r in enumerate(records):
                    r["score"] = round(1.0 / (1 + rank), 6)  # as a store scores recency
            elif self.config.fusion == "score":
                records = merge_by_score(ranked, limit)
            else:
                records = merge_rrf(ranked, k=self.config.rrf_k, limit=limit)
        if params.min_score is not None:
            records = [r for r in records if r["score"] >= params.min_score]
        return {**_result(records, options), **extra}

    @staticmethod
    def _ranked(ok: Sequence[_Outcome]) -> list[tuple[list[dict[str, Any]], float]]:
        return [
            ([_encoded(o.member.name, r) for r in o.result["records"]], o.member.weight) for o in ok
        ]

    @staticmethod
    def _caller(
        asked: RecallParams, routes: dict[str, Any], caller: Caller
    ) -> Callable[[Member], Awaitable[Any]]:
        def call(m: Member) -> Awaitable[Any]:
            return m.store.recall(asked.model_copy(update={"where": routes[m.name]}), caller)

        return call

    def _depth(self, limit: int) -> int:
        """How deep each member is asked under `fusion: shards`: its hybrid leg depth."""
        top = min(m.store.config.limits.max_recall_limit for m in self.members)
        return min(top, max(limit, *(m.store.config.search.candidates for m in self.members)))

    async def _recall_shards(
        self,
        params: RecallParams,
        asked: RecallParams,
        routes: dict[str, Any],
        members: Sequence[Member],
        caller: Caller,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A query under `fusion: shards`: ranked as one store holding every member's records.

        Members in lexical mode answer a text-only call lexically and an embedding-only
        call densely, so with both in the call each leg is fanned out and merged across
        members (lexical calibrated, dense by cosine), and the merged legs are fused as
        one store fuses them. Otherwise the members' answers are merged calibrated.
        """
        limit = asked.limit or 0
        depth = self._depth(limit)
        deep = asked.model_copy(update={"limit": depth})
        split = params.embedding is not None and all(
            m.store.config.search.mode == SearchMode.LEXICAL for m in members
        )
        if not split:
            ok, extra = self._answered(
                await self._fan_out(self._caller(deep, routes, caller), members)
            )
            return merge_calibrated(self._ranked(ok), limit), extra
        lexical = deep.model_copy(update={"embedding": None})
        dense = deep.model_copy(update={"query": None})
        lex_call = self._caller(lexical, routes, caller)
        dense_call = self._caller(dense, routes, caller)

        async def both(m: Member) -> tuple[Any, Any]:
            # Both legs finish before a failure is raised: no leg is left running.
            legs = list(await asyncio.gather(lex_call(m), dense_call(m), return_exceptions=True))
            for leg in legs:
                if isinstance(leg, BaseException):
                    raise leg
            return legs[0], legs[1]

        ok, extra = self._answered(await self._fan_out(both, members))
        lex_ranked = [
            ([_encoded(o.member.name, r) for r in o.result[0]["records"]], o.member.weight)
            for o in ok
        ]
        dense_ranked = [
            ([_encoded(o.member.name, r) for r in o.result[1]["records"]], o.member.weight)
            for o in ok
        ]
        s = self.members[0].store.config.search
        records = fuse_legs(
            merge_calibrated(lex_ranked, depth),
            merge_by_score(dense_ranked, depth),
            k=s.rrf_k,
            lexical_weight=s.lexical_weight,
            dense_weight=s.dense_weight,
            limit=limit,
        )
        return records, extra

    # -- timeline -------------------------------------------------------------------

    async def timeline(self, params: TimelineParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/timeline: the members' ascending streams merged; the newest `limit`.

        Never through recall: every member answers its own ordered read.

        Raises:
            InvalidParams, CapabilityNotSupported, ScopeDenied; BackendUnavailable or
                BackendTimeout: no member answered.
        """
        options = self._gate(params)
        limit = self._limit(params.limit, "default_timeline_limit")
        asked = params.model_copy(update={"limit": limit, "prompt": None})
        routes = dict((m.name, w) for m, w in self._routes(params.where))
        members = [m for m in self.members if m.name in routes]

        def call(m: Member) -> Awaitable[Any]:
            return m.store.timeline(asked.model_copy(update={"where": routes[m.name]}), caller)

        ok, extra = self._answered(await self._fan_out(call, members))
        streams = [[_encoded(o.member.name, r) for r in o.result["records"]] for o in ok]
        # The wire form of created_at is fixed-width RFC 3339 UTC: it sorts as text.
        merged = list(heapq.merge(*streams, key=lambda r: r["created_at"]))
        records = merged[-limit:] if limit else []
        return {**_result(records, options, prefer_newest=True), **extra}

    # -- fetch --------------------------------------------------------------------------

    async def fetch(self, params: FetchParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/fetch: the record at the key in the first member (config order) holding it.

        Raises:
            InvalidParams, ScopeDenied; BackendUnavailable or BackendTimeout: no member
                answered.
        """
        outcomes = await self._fan_out(lambda m: m.store.fetch(params, caller), self.members)
        ok, extra = self._answered(outcomes)
        for o in ok:
            record = o.result["record"]
            if record is not None:
                return {"record": _encoded(o.member.name, record), **extra}
        return {"record": None, **extra}


def _encoded(member: str, record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "id": encode_id(member, record["id"])}


def _newest_first(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: r["created_at"], reverse=True)


def _result(
    records: list[dict[str, Any]], options: PromptOptions | None, *, prefer_newest: bool = False
) -> dict[str, Any]:
    result: dict[str, Any] = {"records": records}
    if wanted(options):
        assert options is not None
        rendered = render([_record(r) for r in records], options, prefer_newest=prefer_newest)
        result["prompt"] = rendered.text
        result["prompt_ids"] = rendered.ids
    return result


def _record(wire: dict[str, Any]) -> Record:
    """A wire record back as a Record, for the prompt renderer."""
    return Record(
        id=wire["id"],
        content=wire.get("content"),
        role=wire.get("role"),
        metadata=wire.get("metadata"),
        group=wire.get("group"),
        owner=wire.get("owner"),
        key=wire.get("key"),
        created_at=parse_timestamp(wire.get("created_at")),
        updated_at=parse_timestamp(wire.get("updated_at")),
        uri=wire.get("uri"),
        media_type=wire.get("media_type"),
        score=wire.get("score"),
        embedding=wire.get("embedding"),
    )
