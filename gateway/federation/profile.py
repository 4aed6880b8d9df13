"""What a federation declares: the capabilities, describe, limits and gate of its members.

Changes with what the members hold (A2M §3.7: a federation declares what every
opened member declares), never with how they are called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway import PROTOCOL
from gateway.a2m.errors import CapabilityNotSupported, InvalidParams
from gateway.a2m.methods import METHOD_CAPABILITY, Capability
from gateway.a2m.params import DescribeParams, PromptOptions, RecallParams, TimelineParams
from gateway.config import FederationConfig
from gateway.federation.fanout import Member
from gateway.front.prompt import check_options
from gateway.security.scopes import LOCAL, Caller
from gateway.store.store import Store


class FederationProfile:
    """The members' intersection, as one store would declare it."""

    def __init__(self, name: str, config: FederationConfig, members: Sequence[Member]) -> None:
        self.name = name
        self.config = config
        self.members = list(members)

    @property
    def capabilities(self) -> list[Capability]:
        """What every opened member declares; embeddings only with one model and width."""
        started = [m.store for m in self.members if m.store.started]
        if not started:
            return [Capability.CORE]
        caps = [c for c in started[0].capabilities if all(c in s.capabilities for s in started)]
        if Capability.EMBEDDINGS in caps and embeddings(started) is None:
            caps.remove(Capability.EMBEDDINGS)
        return caps

    def declares(self, cap: Capability) -> bool:
        return cap in self.capabilities

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
            shared = embeddings([m.store for m in started])
            assert shared is not None  # the capability is declared only then
            result["embeddings"] = shared
        if Capability.PROMPT.value in capabilities:
            prompt = dict(docs[0]["prompt"])
            prompt["max_budget"] = min(d["prompt"]["max_budget"] for d in docs)
            result["prompt"] = prompt
        result["search"] = {"mode": "federated", "server": docs[0]["search"]["server"]}
        result["members"] = [
            {"store": m.name, "weight": m.weight, "open": m.store.started} for m in self.members
        ]
        return result

    def limit(self, limit: int | None, default: str) -> int:
        """The members' smallest limits. Raises: InvalidParams: above max_recall_limit."""
        lims = [m.store.config.limits for m in self.members]
        top = min(lim.max_recall_limit for lim in lims)
        if limit is None:
            return min(int(getattr(lim, default)) for lim in lims)
        if limit == 0:
            return top  # DECISIONS.md §2: as many as the store allows
        if limit > top:
            raise InvalidParams(f"'limit' must be between 0 and {top} (max_recall_limit)")
        return limit

    def gate(self, params: RecallParams | TimelineParams) -> PromptOptions | None:
        """Raises: CapabilityNotSupported, InvalidParams: what no member can answer."""
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
    return {"dimensions": dims, "metric": metric, "metrics": metrics, "model": model}
