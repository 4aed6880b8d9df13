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

from connectors.errors import ConnectorError
from gateway.a2m.errors import A2MError, BackendTimeout, BackendUnavailable, EngineTroubleError
from gateway.a2m.failures import engine_trouble
from gateway.a2m.params import WhereValue
from gateway.a2m.records import Record
from gateway.embedders import EmbedderUnavailable
from gateway.resilience import unheld
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


def encoded(member: str, records: list[Record]) -> list[Record]:
    """The member's records with federation ids (the records are this call's own)."""
    for r in records:
        r.id = encode_id(member, r.id)
    return records


@dataclass(frozen=True, slots=True)
class Member:
    store: Store
    weight: float

    @property
    def name(self) -> str:
        return self.store.name


@dataclass(slots=True)
class MemberAnswer:
    """What one member gave the fan-out: its result, or why it was left out or refused."""

    member: Member
    result: Any = None
    trouble: EngineTroubleError | None = None
    """Why the member was left out (its engine trouble, as the wire names it)."""
    wait_ms: int | None = None
    """When the member's engine may answer again, if it said."""
    refusal: A2MError | None = None

    @property
    def reason(self) -> str | None:
        return None if self.trouble is None else self.trouble.reason.value


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
    ) -> list[MemberAnswer]:
        """Run `call` on every member; engine trouble and overruns become left-out outcomes.

        Raises:
            A2MError: a member's refusal (the caller's bad params, a scope refusal), the
                first in config order, raised after every member finished.
        """

        async def one(member: Member) -> MemberAnswer:
            try:
                async with asyncio.timeout(self.deadline_s):
                    await member.store.ensure_started()
                    return MemberAnswer(member, result=await call(member))
            except TimeoutError:
                outcome = MemberAnswer(member, trouble=BackendTimeout())
            except A2MError as exc:
                # Held, not raised, so the other members finish and no task is orphaned.
                return MemberAnswer(member, refusal=exc)
            except Exception as exc:
                outcome = left_out(member, exc)
            if observe:
                reason = outcome.reason
                for observer in self.observers:
                    observer(self._federation, member.name, str(reason))
                log.warning(
                    "federation %s: member %s left out (%s)", self._federation, member.name, reason
                )
            return outcome

        with unheld():  # a member that is down is left out at once (resilience/hold.py)
            outcomes = list(await asyncio.gather(*(one(m) for m in members)))
        for o in outcomes:
            if o.refusal is not None:
                raise o.refusal  # the first member's, in config order
        return outcomes

    async def answered(
        self, call: Callable[[Member], Awaitable[Any]], members: Sequence[Member]
    ) -> tuple[list[MemberAnswer], list[dict[str, Any]] | None]:
        """Fan out; the members that answered, and `left_out` (None when every one did).

        Raises:
            A2MError: a member's refusal; BackendUnavailable, BackendTimeout: no member
                answered.
        """
        outcomes = await self(call, members)
        ok = [o for o in outcomes if o.reason is None]
        if outcomes and not ok:
            raise all_failed(outcomes)
        left = [{"member": o.member.name, "reason": o.reason} for o in outcomes if o.reason]
        return ok, (left or None)


def left_out(member: Member, exc: Exception) -> MemberAnswer:
    """A member's failure as a left-out outcome: any engine or embedder trouble.

    Raises:
        Exception: `exc` itself when it is none of those (a bug: the call's to answer).
    """
    trouble = engine_trouble(exc)
    if trouble is not None:
        wait = None if isinstance(trouble, BackendTimeout) else trouble.data["retry_after_ms"]
        return MemberAnswer(member, trouble=trouble, wait_ms=wait)
    if isinstance(exc, EmbedderUnavailable):
        # A member that cannot embed the query is left out like an unavailable engine.
        return MemberAnswer(member, trouble=BackendUnavailable(), wait_ms=exc.retry_after_ms)
    if isinstance(exc, ConnectorError):
        return MemberAnswer(member, trouble=BackendUnavailable())
    raise exc


def all_failed(outcomes: Sequence[MemberAnswer]) -> Exception:
    """The engine-trouble error of a call no member answered."""
    troubles = [o.trouble for o in outcomes if o.trouble is not None]
    if troubles and all(isinstance(t, BackendTimeout) for t in troubles):
        return BackendTimeout("No store of this federation answered in time")
    wait = max((o.wait_ms for o in outcomes if o.wait_ms is not None), default=None)
    return BackendUnavailable("No store of this federation is available", retry_after_ms=wait)
