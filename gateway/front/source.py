"""The contract between the front and what it stands before: a store or a federation.

A source answers reads with records; everything the two kinds share (the gate,
limits, scores of recency reads, min_score, prompt, the wire form and describe)
is the front's, driven by the source's :class:`~gateway.front.profile.Profile`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gateway.a2m.params import FetchParams, RecallParams, TimelineParams
from gateway.a2m.records import Record
from gateway.front.profile import Profile
from gateway.security.scopes import Caller


@dataclass(slots=True)
class Answer:
    """Records, best (recall) or oldest (timeline) first; `left_out` names silent members."""

    records: list[Record]
    left_out: list[dict[str, Any]] | None = None


class Source(Protocol):
    @property
    def name(self) -> str: ...

    async def ensure_started(self) -> None:
        """Open on first use. Raises: connectors.errors.ConnectorError, GuardRefusal."""

    def profile(self) -> Profile:
        """What the source declares now."""

    def admits(self, caller: Caller) -> bool:
        """Whether `caller` may use this source at all (a store's ``scope.allow``)."""

    def withheld(self, caller: Caller) -> frozenset[str]:
        """The member stores `caller` may not use: never asked, never named to it."""

    def scoped(self, caller: Caller) -> bool:
        """Whether describe declares `scopes` to this caller."""

    def check_owner(self, caller: Caller, owner: str) -> None:
        """describe's `owner`. Raises: ScopeDenied: an owner the caller may not act for."""

    async def read_recall(self, params: RecallParams, limit: int, caller: Caller) -> Answer:
        """At most `limit` records; no query: newest first, scored by the front."""

    async def read_timeline(self, params: TimelineParams, limit: int, caller: Caller) -> Answer:
        """The newest `limit` records, oldest first."""

    async def read_fetch(self, params: FetchParams, caller: Caller) -> Answer:
        """The record at the key (none, or one, without a score)."""
