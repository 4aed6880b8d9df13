"""Every method of the A2M 0.1 draft and the capability it belongs to (DECISIONS.md §2)."""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    CORE = "core"
    TIERS = "tiers"
    SALIENCE = "salience"
    KEYS = "keys"
    SESSIONS = "sessions"
    EVENTS = "events"
    SUMMARIZE = "summarize"
    EMBEDDINGS = "embeddings"
    EXTERNAL = "external"
    SCOPES = "scopes"
    PROMPT = "prompt"


METHOD_CAPABILITY: dict[str, Capability] = {
    "memory/describe": Capability.CORE,
    "memory/remember": Capability.CORE,
    "memory/recall": Capability.CORE,
    "memory/timeline": Capability.CORE,
    "memory/forget": Capability.CORE,
    "memory/promote": Capability.TIERS,
    "memory/consolidate": Capability.TIERS,
    "memory/reinforce": Capability.SALIENCE,
    "memory/fetch": Capability.KEYS,
    "memory/session/list": Capability.SESSIONS,
    "memory/session/close": Capability.SESSIONS,
    "memory/events": Capability.EVENTS,
    "memory/events/subscribe": Capability.EVENTS,
    "memory/events/unsubscribe": Capability.EVENTS,
    "memory/summarize": Capability.SUMMARIZE,
}

WRITE_METHODS = frozenset({"memory/remember", "memory/forget"})
"""Answered READ_ONLY before params are read (DECISIONS.md §2). memory/summarize is not
here: its capability is never declared, so it answers CAPABILITY_NOT_SUPPORTED (§2)."""
