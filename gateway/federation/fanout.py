"""A federation's members and the one way it calls them: concurrently, under its deadline.

What changes together here is the partial-failure policy: a member's engine
trouble or overrun becomes a left-out outcome (observed, logged, named in the
result's ``left_out``), any other refusal is the answer, and when no member
answered the call is the engine-trouble error. Also the ids: a member's record id
``x`` is ``<member>:x`` in the federation, and ``where: {id: ...}`` routes back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.errors import ConnectorError, EngineTimeout, EngineUnavailable
from gateway.a2m.errors import A2MError, BackendTimeout, BackendUnavailable, EngineTrouble
from gateway.a2m.params import WhereValue
from gateway.embedders import EmbedderUnavailable
from gateway.resilience import CircuitOpen, Overloaded
from gateway.store.store import Store

log = logging.getLogger(__name__)

ID_SEPARATOR = ":"

LeftOutObserver = Callable[[str, str, str], None]
"""(federation, member, reason): the metrics module registers one."""


def encode_id(member: str, record_id: str) -> str:
    return f"{member}{ID_SEPARATOR}{record_id}"


def decode_id(value: str) -> tuple[str, str] | None:
    """(member, member's id), or None when the value names no member."""
    member, sep, record_id = value.partition(ID_SEPARATOR)
    return (member, record_id) if sep and member else None


def encoded(member: str, record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "id": encode_id(member, record["id"])}


@dataclass(frozen=True, slots=True)
class Member:
    store: Store
    weight: float

    @property
    def name(self) -> str:
        return self.store.name


@dataclass(slots=True)
class Outcome:
    member: Member
    result: Any = None
    reason: str | None = None
    error: ConnectorError | None = None
    refusal: A2MError | None = None


def routes(members: Sequence[Member], where: dict[str, WhereValue] | None) -> dict[str, Any]:
    """Each member to ask (by name, in config order), with its `where`: ids are routed
    to the member they name."""
    if not where or "id" not in where:
        return {m.name: where for m in members}
    raw = where["id"]
    wanted_ids = raw if isinstance(raw, list) else [raw]
    out = {}
    for m in members:
        own = [
            d[1]
            for v in wanted_ids
            if isinstance(v, str) and (d := decode_id(v)) is not None and d[0] == m.name
        ]
        if own:
            out[m.name] = {**where, "id": own if len(own) > 1 else own[0]}
    return out


class FanOut:
    """Calls members concurrently, each bounded by the federation's deadline."""

    def __init__(
        self, federation: str, deadline_s: float, observers: list[LeftOutObserver] | None
    ) -> None:
        self._federation = federation
        self.deadline_s = deadline_s
        self.observers = observers or []

    async def __call__(
        self,
        call: Callable[[Member], Awaitable[Any]],
        members: Sequence[Member],
        *,
        observe: bool = True,
    ) -> list[Outcome]:
        """Run `call` on every member; engine trouble and overruns become left-out outcomes.

        Raises:
            A2MError: a member's refusal (the caller's bad params, a scope refusal), the
                first in config order, raised after every member finished.
        """

        async def one(member: Member) -> Outcome:
            error: ConnectorError
            try:
                async with asyncio.timeout(self.deadline_s):
                    await member.store.ensure_started()
                    return Outcome(member, result=await call(member))
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
                return Outcome(member, refusal=exc)
            if observe:
                for observer in self.observers:
                    observer(self._federation, member.name, reason.value)
                log.warning(
                    "federation %s: member %s left out (%s)",
                    self._federation,
                    member.name,
                    reason.value,
                )
            return Outcome(member, reason=reason.value, error=error)

        outcomes = list(await asyncio.gather(*(one(m) for m in members)))
        for o in outcomes:
            if o.refusal is not None:
                raise o.refusal  # the first member's, in config order
        return outcomes

    async def answered(
        self, call: Callable[[Member], Awaitable[Any]], members: Sequence[Member]
    ) -> tuple[list[Outcome], dict[str, Any]]:
        """Fan out; the members that answered, and the `left_out` field (absent when none was).

        Raises:
            A2MError: a member's refusal; BackendUnavailable, BackendTimeout: no member
                answered.
        """
        outcomes = await self(call, members)
        ok = [o for o in outcomes if o.reason is None]
        if outcomes and not ok:
            raise all_failed(outcomes)
        left = [{"member": o.member.name, "reason": o.reason} for o in outcomes if o.reason]
        return ok, ({"left_out": left} if left else {})


def all_failed(outcomes: Sequence[Outcome]) -> Exception:
    """The engine-trouble error of a call no member answered."""
    errors = [o.error for o in outcomes if o.error is not None]
    if errors and all(isinstance(e, EngineTimeout) for e in errors):
        return BackendTimeout("No store of this federation answered in time")
    wait = max((e.retry_after_ms for e in errors if isinstance(e, EngineUnavailable)), default=None)
    return BackendUnavailable("No store of this federation is available", retry_after_ms=wait)
