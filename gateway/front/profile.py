"""What a source declares, as one value: capabilities, limits, and the rest of describe.

A store fixes its profile once its engine has been read; a federation's is the
intersection of its opened members'. The front gates, limits and describes by
this value alone, whichever kind of source it stands before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway import PROTOCOL
from gateway.a2m.methods import Capability, methods_of
from gateway.config.stores import LimitsConfig
from gateway.front.prompt import METHODS, STYLES


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits a source applies to every read (A2M describe's `limits`, and the defaults)."""

    max_recall_limit: int
    max_query_length: int
    max_where_keys: int
    max_where_values: int
    max_prompt_budget: int
    default_recall_limit: int
    default_timeline_limit: int

    @classmethod
    def of(cls, config: LimitsConfig) -> Limits:
        return cls(
            max_recall_limit=config.max_recall_limit,
            max_query_length=config.max_query_length,
            max_where_keys=config.max_where_keys,
            max_where_values=config.max_where_values,
            max_prompt_budget=config.max_prompt_budget,
            default_recall_limit=config.default_recall_limit,
            default_timeline_limit=config.default_timeline_limit,
        )

    @classmethod
    def tightest(cls, limits: Sequence[Limits]) -> Limits:
        """The smallest of each limit: what every one of several sources allows."""
        return cls(
            max_recall_limit=min(x.max_recall_limit for x in limits),
            max_query_length=min(x.max_query_length for x in limits),
            max_where_keys=min(x.max_where_keys for x in limits),
            max_where_values=min(x.max_where_values for x in limits),
            max_prompt_budget=min(x.max_prompt_budget for x in limits),
            default_recall_limit=min(x.default_recall_limit for x in limits),
            default_timeline_limit=min(x.default_timeline_limit for x in limits),
        )

    def wire(self) -> dict[str, int]:
        return {
            "max_recall_limit": self.max_recall_limit,
            "max_query_length": self.max_query_length,
            "max_where_keys": self.max_where_keys,
            "max_where_values": self.max_where_values,
        }


@dataclass(frozen=True, slots=True)
class Profile:
    """A source's declared shape; the front reads nothing else about it."""

    name: str
    capabilities: frozenset[Capability]
    order: tuple[Capability, ...]
    """The capabilities in describe's order."""
    limits: Limits
    search: dict[str, Any]
    description: str | None = None
    embeddings: dict[str, Any] | None = None
    members: list[dict[str, Any]] | None = None
    document: dict[str, Any] = field(default_factory=dict, compare=False)
    """describe's result without `scopes` (it depends on the caller), built once."""

    @classmethod
    def build(
        cls,
        name: str,
        capabilities: Sequence[Capability],
        limits: Limits,
        search: dict[str, Any],
        *,
        description: str | None = None,
        embeddings: dict[str, Any] | None = None,
        members: list[dict[str, Any]] | None = None,
    ) -> Profile:
        profile = cls(
            name,
            frozenset(capabilities),
            tuple(capabilities),
            limits,
            search,
            description,
            embeddings,
            members,
        )
        profile.document.update(_document(profile))
        return profile

    def describe(self, scoped: bool) -> dict[str, Any]:
        """memory/describe's result; `scoped`: `scopes` is true for this caller."""
        if not scoped:
            return dict(self.document)
        capabilities = list(self.document["capabilities"])
        at = capabilities.index("prompt") if "prompt" in capabilities else len(capabilities)
        capabilities.insert(at, Capability.SCOPES.value)
        return {**self.document, "capabilities": capabilities}


def _document(p: Profile) -> dict[str, Any]:
    result: dict[str, Any] = {
        "protocol": PROTOCOL,
        "name": p.name,
        "capabilities": [c.value for c in p.order],
        "methods": methods_of(p.capabilities),
        "read_only": True,
        "limits": p.limits.wire(),
    }
    if p.description:
        result["description"] = p.description
    if p.embeddings is not None and Capability.EMBEDDINGS in p.capabilities:
        result["embeddings"] = p.embeddings
    if Capability.PROMPT in p.capabilities:
        result["prompt"] = {
            "styles": list(STYLES),
            "methods": list(METHODS),
            "model": None,
            "max_budget": p.limits.max_prompt_budget,
        }
    result["search"] = p.search
    if p.members is not None:
        result["members"] = p.members
    return result
