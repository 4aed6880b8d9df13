"""Federation: several stores answering as one A2M store.

A federation sits on its members' public Store methods and passes the caller
on, so every member applies its own scope filter, mapping, limits and
deadline; the federation's deadline bounds them all. It adds:

- ids: a member's record id ``x`` is ``<member>:x`` here (store names hold no
  ``:``), so ``where: {id: ...}`` routes back to the member that owns it;
- recall: concurrent fan-out, then one ranking (:mod:`gateway.federation.fusion`):
  weighted reciprocal rank fusion, ``fusion: score`` a merge by weighted member
  score, or ``fusion: shards`` as one index holding every member's records (deep
  calls, lexical scores calibrated per member, hybrid legs fanned out and merged
  separately, then fused); without a query, the members' recency orders are
  merged by ``created_at``;
- timeline: the members' ascending streams merged by ``created_at``;
- describe: what every member can do (A2M §3.7), and the members it spans
  (:mod:`gateway.federation.profile`, with the shared limits and gate);
- partial failure (:mod:`gateway.federation.fanout`, with the ids): a member that
  is down or past the deadline is left out and named in the result's
  ``left_out`` field; when every member fails the call answers the
  engine-trouble error.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from connectors.errors import ConnectorError
from gateway.a2m.errors import CapabilityNotSupported
from gateway.a2m.methods import Capability
from gateway.a2m.params import (
    DescribeParams,
    FetchParams,
    PromptOptions,
    RecallParams,
    TimelineParams,
)
from gateway.a2m.records import Record, parse_timestamp
from gateway.config import FederationConfig, SearchMode
from gateway.federation.fanout import (
    FanOut,
    LeftOutObserver,
    Member,
    Outcome,
    all_failed,
    decode_id,
    encode_id,
    encoded,
    routes,
)
from gateway.federation.fusion import (
    calibrated,
    fuse_legs,
    merge_by_score,
    merge_calibrated,
    merge_rrf,
)
from gateway.federation.profile import FederationProfile
from gateway.front.prompt import render, wanted
from gateway.security.scopes import LOCAL, Caller
from gateway.store.paging import off_loop_if_large

__all__ = ["Federation", "Member", "decode_id", "encode_id"]


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
        self.profile = FederationProfile(name, config, self.members)
        self._fan_out = FanOut(name, (config.deadline_ms or default_timeout_ms) / 1000.0, observers)

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
            raise all_failed(outcomes)

    def observe_left_out(self, observer: LeftOutObserver) -> None:
        self._fan_out.observers.append(observer)

    async def close(self) -> None:
        """Nothing of its own: the gateway closes the member stores."""

    async def ready(self) -> dict[str, bool]:
        """Per member: opened and its engine answers now."""

        async def one(member: Member) -> bool:
            try:
                async with asyncio.timeout(self._fan_out.deadline_s):
                    await member.store.ensure_started()
                    return await member.store.ready()
            except (ConnectorError, TimeoutError):
                return False

        states = await asyncio.gather(*(one(m) for m in self.members))
        return {m.name: s for m, s in zip(self.members, states, strict=True)}

    @property
    def capabilities(self) -> list[Capability]:
        return self.profile.capabilities

    def declares(self, cap: Capability) -> bool:
        return self.profile.declares(cap)

    def describe(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        """memory/describe (see FederationProfile.describe)."""
        return self.profile.describe(params, caller)

    # -- recall ---------------------------------------------------------------------

    async def recall(self, params: RecallParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/recall over every member, fused (`fusion`); scores in [0, 1] descending.

        Raises:
            InvalidParams, CapabilityNotSupported, EmbeddingMismatch, ScopeDenied: from
                the params or a member; BackendUnavailable/BackendTimeout: no member answered.
        """
        options = self.profile.gate(params)
        limit = self.profile.limit(params.limit, "default_recall_limit")
        if params.embedding is not None and not self.declares(Capability.EMBEDDINGS):
            raise CapabilityNotSupported(
                "Server does not implement the 'embeddings' capability (embedding was given)"
            )
        asked = params.model_copy(update={"limit": limit, "prompt": None, "min_score": None})
        asked_where = routes(self.members, params.where)
        members = [m for m in self.members if m.name in asked_where]
        call = self._caller(asked, asked_where, caller)
        if self.config.fusion == "shards" and (params.query or "").strip():
            records, extra = await self._recall_shards(params, asked, asked_where, members, caller)
        elif self.config.fusion == "shards" and params.embedding is not None:
            deep = asked.model_copy(update={"limit": self._depth(limit)})
            ok, extra = await self._fan_out.answered(
                self._caller(deep, asked_where, caller), members
            )
            records = merge_by_score(self._ranked(ok), limit)
        else:
            ok, extra = await self._fan_out.answered(call, members)
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
        shaped = await off_loop_if_large(len(records), lambda: _result(records, options))
        return {**shaped, **extra}

    @staticmethod
    def _ranked(ok: Sequence[Outcome]) -> list[tuple[list[dict[str, Any]], float]]:
        return [
            ([encoded(o.member.name, r) for r in o.result["records"]], o.member.weight) for o in ok
        ]

    @staticmethod
    def _caller(
        asked: RecallParams, asked_where: dict[str, Any], caller: Caller
    ) -> Callable[[Member], Awaitable[Any]]:
        def call(m: Member) -> Awaitable[Any]:
            return m.store.recall(asked.model_copy(update={"where": asked_where[m.name]}), caller)

        return call

    def _depth(self, limit: int) -> int:
        """How deep each member is asked under `fusion: shards`: its hybrid leg depth."""
        top = min(m.store.config.limits.max_recall_limit for m in self.members)
        depths = (m.store.config.search.knn_candidates for m in self.members)
        return min(top, max(limit, *depths))

    async def _recall_shards(
        self,
        params: RecallParams,
        asked: RecallParams,
        asked_where: dict[str, Any],
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
            ok, extra = await self._fan_out.answered(
                self._caller(deep, asked_where, caller), members
            )
            return merge_calibrated(self._ranked(ok), limit), extra
        lexical = deep.model_copy(update={"embedding": None})
        dense = deep.model_copy(update={"query": None})
        lex_call = self._caller(lexical, asked_where, caller)
        dense_call = self._caller(dense, asked_where, caller)

        async def both(m: Member) -> tuple[Any, Any]:
            # Both legs finish before a failure is raised: no leg is left running.
            legs = list(await asyncio.gather(lex_call(m), dense_call(m), return_exceptions=True))
            for leg in legs:
                if isinstance(leg, BaseException):
                    raise leg
            return legs[0], legs[1]

        ok, extra = await self._fan_out.answered(both, members)
        lex_ranked = [
            ([encoded(o.member.name, r) for r in o.result[0]["records"]], o.member.weight)
            for o in ok
        ]
        dense_ranked = [
            ([encoded(o.member.name, r) for r in o.result[1]["records"]], o.member.weight)
            for o in ok
        ]
        s = self.members[0].store.config.search
        lexical_leg = _calibrated_leg(calibrated(lex_ranked, depth))
        records = fuse_legs(
            lexical_leg,
            merge_by_score(dense_ranked, depth),
            fusion=s.fusion,
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
        options = self.profile.gate(params)
        limit = self.profile.limit(params.limit, "default_timeline_limit")
        asked = params.model_copy(update={"limit": limit, "prompt": None})
        asked_where = routes(self.members, params.where)
        members = [m for m in self.members if m.name in asked_where]

        def call(m: Member) -> Awaitable[Any]:
            return m.store.timeline(asked.model_copy(update={"where": asked_where[m.name]}), caller)

        ok, extra = await self._fan_out.answered(call, members)
        streams = [[encoded(o.member.name, r) for r in o.result["records"]] for o in ok]
        # The wire form of created_at is fixed-width RFC 3339 UTC: it sorts as text.
        merged = list(heapq.merge(*streams, key=lambda r: r["created_at"]))
        records = merged[-limit:] if limit else []
        shaped = await off_loop_if_large(
            len(records), lambda: _result(records, options, prefer_newest=True)
        )
        return {**shaped, **extra}

    # -- fetch --------------------------------------------------------------------------

    async def fetch(self, params: FetchParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/fetch: the record at the key in the first member (config order) holding it.

        Raises:
            InvalidParams, ScopeDenied; BackendUnavailable or BackendTimeout: no member
                answered.
        """
        ok, extra = await self._fan_out.answered(
            lambda m: m.store.fetch(params, caller), self.members
        )
        for o in ok:
            record = o.result["record"]
            if record is not None:
                return {"record": encoded(o.member.name, record), **extra}
        return {"record": None, **extra}


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


def _calibrated_leg(values: list[tuple[float, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The merged lexical leg, each record scored by its calibrated value (a weight-0
    member's, minus infinity, at the lowest finite value: last, but still on the scale)."""
    floor = min((c for c, _ in values if math.isfinite(c)), default=0.0)
    return [{**r, "score": c if math.isfinite(c) else floor} for c, r in values]
