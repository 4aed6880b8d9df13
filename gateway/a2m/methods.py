"""The one method registry: every method of the A2M 0.1 draft (docs/protocol.md).

Each entry holds the method's name, its capability, its params model and its
handler: the name of the :class:`Reader` method that answers it, which each
dispatcher binds to its front once (:meth:`Method.bind`), so a call runs the
front's method directly. The dispatcher routes by it, the
capability gate and describe's `methods` read it, and so does the MCP layer for
the methods its tools call. A method without a handler is one this read-only
gateway never serves: writes answer READ_ONLY before params are read; the
others' capability is never declared, so they answer CAPABILITY_NOT_SUPPORTED.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from gateway.a2m.params import (
    DescribeParams,
    FetchParams,
    Params,
    RecallParams,
    TimelineParams,
)
from gateway.security.scopes import Caller


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


class Reader(Protocol):
    """What answers the read methods (gateway.front.Front)."""

    async def describe(self, params: DescribeParams, caller: Caller) -> dict[str, Any]: ...

    async def recall(self, params: RecallParams, caller: Caller) -> dict[str, Any]: ...

    async def timeline(self, params: TimelineParams, caller: Caller) -> dict[str, Any]: ...

    async def fetch(self, params: FetchParams, caller: Caller) -> dict[str, Any]: ...


ReaderMethod = Callable[[Any, Caller], Awaitable[dict[str, Any]]]
"""A Reader's method, bound: (parsed params, caller) -> the wire result."""


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    capability: Capability
    params: type[Params] | None = None
    handler: str | None = None
    """The Reader method answering it; None: never served here."""
    writes: bool = False

    def bind(self, reader: Reader) -> ReaderMethod | None:
        """This method's handler on `reader`, or None when it has none."""
        return None if self.handler is None else getattr(reader, self.handler)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("memory/describe", Capability.CORE, DescribeParams, "describe"),
        Method("memory/remember", Capability.CORE, writes=True),
        Method("memory/recall", Capability.CORE, RecallParams, "recall"),
        Method("memory/timeline", Capability.CORE, TimelineParams, "timeline"),
        Method("memory/forget", Capability.CORE, writes=True),
        Method("memory/promote", Capability.TIERS),
        Method("memory/consolidate", Capability.TIERS),
        Method("memory/reinforce", Capability.SALIENCE),
        Method("memory/fetch", Capability.KEYS, FetchParams, "fetch"),
        Method("memory/session/list", Capability.SESSIONS),
        Method("memory/session/close", Capability.SESSIONS),
        Method("memory/events", Capability.EVENTS),
        Method("memory/events/subscribe", Capability.EVENTS),
        Method("memory/events/unsubscribe", Capability.EVENTS),
        Method("memory/summarize", Capability.SUMMARIZE),
    )
}

METHOD_CAPABILITY: dict[str, Capability] = {m.name: m.capability for m in METHODS.values()}
"""Each method's capability, read from the registry (for those who need only that)."""


def methods_of(capabilities: Iterable[Capability]) -> list[str]:
    """describe's `methods`: every method whose capability is declared, in draft order."""
    declared = set(capabilities)
    return [m.name for m in METHODS.values() if m.capability in declared]
