"""Federation: several stores answering as one A2M store.

A federation is a source behind the front (gateway.front) that fans out to
sources: it reads each member through the member's own front and passes the
caller on, so every member applies its own gate, scope filter, mapping, limits
and deadline; the federation's deadline bounds them all. It adds:

- ids: a member's record id ``x`` is ``<member>:x`` here (store names hold no
  ``:``), so ``where: {id: ...}`` routes back to the member that owns it;
- recall: concurrent fan-out, then one ranking (:mod:`gateway.federation.fusion`):
  weighted reciprocal rank fusion, ``fusion: score`` a merge by weighted member
  score, or ``fusion: shards`` as one index holding every member's records
  (:mod:`gateway.federation.shards`); without a query, the members' recency orders are
  merged by ``created_at``;
- timeline: the members' ascending streams merged by ``created_at``;
- its profile: what every opened member can do (A2M §3.7), the tightest
  limits, and the members it spans (:mod:`gateway.federation.profile`);
- partial failure (:mod:`gateway.federation.fanout`, with the ids): a member that
  is down or past the deadline is left out and named in the result's
  ``left_out`` field; when every member fails the call answers the
  engine-trouble error.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from connectors.errors import ConnectorError
from gateway.a2m.params import FetchParams, RecallParams, TimelineParams
from gateway.a2m.records import EPOCH, Record, format_timestamp
from gateway.config import FederationConfig
from gateway.federation.fanout import (
    FanOut,
    LeftOutObserver,
    Member,
    MemberAnswer,
    all_failed,
    decode_id,
    encode_id,
    encoded,
    routes,
)
from gateway.federation.fusion import (
    merge_by_score,
    merge_rrf,
)
from gateway.federation.profile import FederationProfile
from gateway.federation.shards import recall_shards
from gateway.front.front import Front
from gateway.front.profile import Profile
from gateway.front.source import Answer
from gateway.resilience import GuardRefusal
from gateway.security.scopes import Caller

__all__ = ["Federation", "Member", "decode_id", "encode_id"]

Ranked = list[tuple[list[Record], float]]


class Federation:
    """A source to its front, composed of member stores (see the module docstring)."""

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
        self.declared = FederationProfile(name, config, self.members)
        self.limits = self.declared.limits
        self.front = Front(self)
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
            except (ConnectorError, GuardRefusal, TimeoutError):
                return False

        states = await asyncio.gather(*(one(m) for m in self.members))
        return {m.name: s for m, s in zip(self.members, states, strict=True)}

    # -- the source the front stands before -------------------------------------------

    def profile(self) -> Profile:
        return self.declared.value()

    def _opened(self, caller: Caller) -> list[Member]:
        return [m for m in self._usable(caller) if m.store.started]

    def _usable(self, caller: Caller) -> list[Member]:
        """The members `caller` may use (``scope.allow``); the others are left out unnamed."""
        return [m for m in self.members if m.store.admits(caller)]

    def admits(self, caller: Caller) -> bool:
        return any(m.store.admits(caller) for m in self.members)

    def withheld(self, caller: Caller) -> frozenset[str]:
        return frozenset(m.name for m in self.members if not m.store.admits(caller))

    def scoped(self, caller: Caller) -> bool:
        opened = self._opened(caller)
        return bool(opened) and all(m.store.scoped(caller) for m in opened)

    def check_owner(self, caller: Caller, owner: str) -> None:
        for m in self._opened(caller):
            m.store.check_owner(caller, owner)

    # -- recall ---------------------------------------------------------------------

    async def read_recall(self, params: RecallParams, limit: int, caller: Caller) -> Answer:
        """Every member's recall, fused (`fusion`); scores in [0, 1] descending.

        Raises:
            InvalidParams, CapabilityNotSupported, EmbeddingMismatch, ScopeDenied: from
                a member; BackendUnavailable/BackendTimeout: no member answered.
        """
        asked = params.model_copy(update={"limit": limit, "prompt": None, "min_score": None})
        asked_where = routes(self._usable(caller), params.where)
        members = [m for m in self.members if m.name in asked_where]
        query = bool((params.query or "").strip())
        if self.config.fusion == "shards" and query:
            return await recall_shards(
                self._fan_out,
                lambda p: self._asker(p, asked_where, caller),
                asked.model_copy(update={"limit": self._depth(limit)}),
                members,
                limit=limit,
                search=self.members[0].store.config.search,
            )
        if self.config.fusion == "shards" and params.embedding is not None:
            deep = asked.model_copy(update={"limit": self._depth(limit)})
            ok, left = await self._fan_out.answered(self._asker(deep, asked_where, caller), members)
            return Answer(merge_by_score(_ranked(ok), limit), left)
        ok, left = await self._fan_out.answered(self._asker(asked, asked_where, caller), members)
        ranked = _ranked(ok)
        if not query and params.embedding is None:
            # The front scores the merged recency order as a store's.
            merged = sorted((r for rs, _ in ranked for r in rs), key=_created, reverse=True)
            return Answer(merged[:limit], left)
        if self.config.fusion == "score":
            return Answer(merge_by_score(ranked, limit), left)
        return Answer(merge_rrf(ranked, k=self.config.rrf_k, limit=limit), left)

    @staticmethod
    def _asker(
        asked: RecallParams, asked_where: dict[str, Any], caller: Caller
    ) -> Callable[[Member], Awaitable[Answer]]:
        def call(m: Member) -> Awaitable[Answer]:
            own = asked.model_copy(update={"where": asked_where[m.name]})
            return m.store.front.recall_answer(own, caller)

        return call

    def _depth(self, limit: int) -> int:
        """How deep each member is asked under `fusion: shards`: its hybrid leg depth."""
        top = self.limits.max_recall_limit
        depths = (m.store.config.search.knn_candidates for m in self.members)
        return min(top, max(limit, *depths))

    # -- timeline -------------------------------------------------------------------

    async def read_timeline(self, params: TimelineParams, limit: int, caller: Caller) -> Answer:
        """The members' ascending streams merged; the newest `limit`, oldest first.

        Never through recall: every member answers its own ordered read.

        Raises:
            InvalidParams, CapabilityNotSupported, ScopeDenied; BackendUnavailable or
                BackendTimeout: no member answered.
        """
        asked = params.model_copy(update={"limit": limit, "prompt": None})
        asked_where = routes(self._usable(caller), params.where)
        members = [m for m in self.members if m.name in asked_where]

        def call(m: Member) -> Awaitable[Answer]:
            own = asked.model_copy(update={"where": asked_where[m.name]})
            return m.store.front.timeline_answer(own, caller)

        ok, left = await self._fan_out.answered(call, members)
        streams = [encoded(o.member.name, o.result.records) for o in ok]
        merged = list(heapq.merge(*streams, key=_created))
        return Answer(merged[-limit:] if limit else [], left)

    # -- fetch --------------------------------------------------------------------------

    async def read_fetch(self, params: FetchParams, caller: Caller) -> Answer:
        """The record at the key in the first member (config order) holding it.

        Raises:
            InvalidParams, ScopeDenied; BackendUnavailable or BackendTimeout: no member
                answered.
        """
        ok, left = await self._fan_out.answered(
            lambda m: m.store.front.fetch_answer(params, caller), self._usable(caller)
        )
        for o in ok:
            if o.result.records:
                return Answer(encoded(o.member.name, o.result.records[:1]), left)
        return Answer([], left)


def _ranked(ok: Sequence[MemberAnswer]) -> Ranked:
    return [(encoded(o.member.name, o.result.records), o.member.weight) for o in ok]


def _created(record: Record) -> str:
    # The wire form of created_at, fixed-width RFC 3339 UTC: it sorts as text.
    return format_timestamp(record.created_at or EPOCH)
