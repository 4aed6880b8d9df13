"""What a federation declares: the Profile (gateway.front.profile) of its opened members.

Changes with what the members hold (A2M §3.7: a federation declares what every
opened member declares), never with how they are called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.a2m.methods import Capability
from gateway.config import FederationConfig
from gateway.federation.fanout import Member
from gateway.front.profile import Limits, Profile
from gateway.store.store import Store


class FederationProfile:
    """The members' intersection, as one store would declare it; rebuilt as members open."""

    def __init__(self, name: str, config: FederationConfig, members: Sequence[Member]) -> None:
        self.name = name
        self.config = config
        self.members = list(members)
        # Every member's limits bound every call, opened or not.
        self.limits = Limits.tightest([m.store.limits for m in self.members])
        self._built: tuple[tuple[bool, ...], Profile] | None = None

    def value(self) -> Profile:
        opened = tuple(m.store.started for m in self.members)
        if self._built is None or self._built[0] != opened:
            self._built = (opened, self._build())
        return self._built[1]

    def _build(self) -> Profile:
        started = [m.store for m in self.members if m.store.started]
        caps = [Capability.CORE]
        shared = embeddings(started) if started else None
        if started:
            caps = [c for c in started[0].capabilities if all(c in s.capabilities for s in started)]
            if Capability.EMBEDDINGS in caps and shared is None:
                caps.remove(Capability.EMBEDDINGS)
        server = started[0].profile().search["server"] if started else None
        return Profile.build(
            self.name,
            caps,
            self.limits,
            {"mode": "federated", "server": server},
            description=self.config.description,
            embeddings=shared,
            members=[
                {"store": m.name, "weight": m.weight, "open": m.store.started} for m in self.members
            ],
        )


def embeddings(stores: Sequence[Store]) -> dict[str, Any] | None:
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
    return {"dimensions": dims, "metric": metric, "metrics": list(metrics), "model": model}
