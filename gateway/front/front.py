"""The front: the one layer above every source, store or federation alike.

Driven by the source's profile, it gates methods and params by capability,
applies the limits, and shapes what the source answered: recency scores for a
read without a query, ``min_score``, the prompt and its budget, the wire form.
It also writes describe. The A2M dispatcher and the MCP tools reach sources
only through it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway import PROTOCOL
from gateway.a2m.errors import CapabilityNotSupported, InvalidParams, ProtocolNotSupported
from gateway.a2m.methods import METHODS, Capability
from gateway.a2m.params import (
    DescribeParams,
    FetchParams,
    PromptOptions,
    ReadParams,
    RecallParams,
    TimelineParams,
    limit_out_of_range,
)
from gateway.a2m.records import Record
from gateway.front.profile import Limits, Profile
from gateway.front.prompt import check_options, render, wanted
from gateway.front.source import Answer, Source
from gateway.security.scopes import LOCAL, Caller

INLINE_RECORDS = 64
"""Above this many records the wire form and prompt are built on a worker thread
(~5 µs a record): a large page must not hold the event loop."""


class Front:
    """Answers the read methods of one source (see the module docstring)."""

    def __init__(self, source: Source) -> None:
        self.source = source

    @property
    def name(self) -> str:
        return self.source.name

    def profile(self) -> Profile:
        return self.source.profile()

    # -- the gate ------------------------------------------------------------------

    def gate_method(self, method: str) -> None:
        """Raises: CapabilityNotSupported: the method's capability is not declared."""
        cap = METHODS[method].capability
        if cap not in self.source.profile().capabilities:
            raise CapabilityNotSupported(
                f"Server does not implement the '{cap.value}' capability",
                data={"capability": cap.value},
            )

    @staticmethod
    def _gate_read(profile: Profile, params: ReadParams) -> tuple[PromptOptions | None, int]:
        """The prompt options and limit of a read, once its params passed the gate.

        Raises:
            CapabilityNotSupported: a param of an undeclared capability was given.
            InvalidParams: beyond a limit, or prompt options not offered.
        """
        caps = profile.capabilities
        if params.tier is not None:
            raise CapabilityNotSupported(
                "Server does not implement the 'tiers' capability (tier was given)"
            )
        if params.key_prefix is not None and Capability.KEYS not in caps:
            raise CapabilityNotSupported(
                "Server does not implement the 'keys' capability (key_prefix was given)"
            )
        if (
            isinstance(params, RecallParams)
            and params.embedding is not None
            and Capability.EMBEDDINGS not in caps
        ):
            raise CapabilityNotSupported(
                "Server does not implement the 'embeddings' capability (embedding was given)"
            )
        lim = profile.limits
        default = (
            lim.default_recall_limit
            if isinstance(params, RecallParams)
            else lim.default_timeline_limit
        )
        limit = _limit(params.limit, default, lim)
        if isinstance(params, RecallParams) and len(params.query or "") > lim.max_query_length:
            raise InvalidParams(
                f"Invalid params: 'query' is longer than max_query_length ({lim.max_query_length})",
                data={"fields": ["query"]},
            )
        options = params.prompt_options()
        if options is not None:
            check_options(options, lim.max_prompt_budget)
        return options, limit

    # -- the reads -------------------------------------------------------------------

    async def describe(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        return self.describe_now(params, caller)

    def describe_now(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        """memory/describe, built from what the source really holds.

        Raises:
            ProtocolNotSupported: the client asked for another protocol version.
            ScopeDenied: an owner the caller may not act for.
        """
        if params is not None and params.protocol is not None and params.protocol != PROTOCOL:
            raise ProtocolNotSupported(
                f"Protocol {params.protocol!r} is not supported; this server speaks {PROTOCOL}",
                data={"supported": [PROTOCOL]},
            )
        source = self.source
        if params is not None and params.owner is not None:
            # describe reports no counts to scope, but an owner the caller may not act
            # for is refused here as on every other method (-32005).
            source.check_owner(caller, params.owner)
        described = source.profile().describe(source.scoped(caller))
        withheld = source.withheld(caller)
        if withheld and "members" in described:  # a member the caller may not use goes unnamed
            members = [m for m in described["members"] if m["store"] not in withheld]
            described = {**described, "members": members}
        return described

    async def recall_answer(self, params: RecallParams, caller: Caller = LOCAL) -> Answer:
        """memory/recall's records, scores in [0, 1] descending, before prompt and wire."""
        _, limit = self._gate_read(self.source.profile(), params)
        return await self._recall(params, limit, caller)

    async def _recall(self, params: RecallParams, limit: int, caller: Caller) -> Answer:
        answer = await self.source.read_recall(params, limit, caller)
        if params.embedding is None and not (params.query or "").strip():
            # No query: recency order; the score states that rank, nothing more.
            for rank, r in enumerate(answer.records):
                r.score = round(1.0 / (1 + rank), 6)
        if params.min_score is not None:
            floor = params.min_score
            answer.records = [r for r in answer.records if (r.score or 0.0) >= floor]
        return answer

    async def recall(self, params: RecallParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/recall. Raises: A2M errors, and the source's engine trouble."""
        options, limit = self._gate_read(self.source.profile(), params)
        return await self._shaped(await self._recall(params, limit, caller), options)

    async def timeline_answer(self, params: TimelineParams, caller: Caller = LOCAL) -> Answer:
        _, limit = self._gate_read(self.source.profile(), params)
        return await self.source.read_timeline(params, limit, caller)

    async def timeline(self, params: TimelineParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/timeline: oldest first, the newest `limit`. Raises: as recall."""
        options, limit = self._gate_read(self.source.profile(), params)
        answer = await self.source.read_timeline(params, limit, caller)
        return await self._shaped(answer, options, prefer_newest=True)

    @staticmethod
    def result(
        records: list[Record], options: PromptOptions | None, prefer_newest: bool
    ) -> dict[str, Any]:
        """The wire result: the records, and the prompt when one is wanted."""
        result: dict[str, Any] = {"records": [r.to_wire() for r in records]}
        if options is not None and wanted(options):
            rendered = render(records, options, prefer_newest=prefer_newest)
            result["prompt"] = rendered.text
            result["prompt_ids"] = rendered.ids
        return result

    async def _shaped(
        self, answer: Answer, options: PromptOptions | None, *, prefer_newest: bool = False
    ) -> dict[str, Any]:
        records = answer.records
        if len(records) <= INLINE_RECORDS:
            result = self.result(records, options, prefer_newest)
        else:
            result = await asyncio.to_thread(self.result, records, options, prefer_newest)
        if answer.left_out:
            result["left_out"] = answer.left_out
        return result

    async def fetch_answer(self, params: FetchParams, caller: Caller = LOCAL) -> Answer:
        return await self.source.read_fetch(params, caller)

    async def fetch(self, params: FetchParams, caller: Caller = LOCAL) -> dict[str, Any]:
        """memory/fetch: the record at a key, or null (also when the caller may not see it)."""
        answer = await self.source.read_fetch(params, caller)
        result: dict[str, Any] = {"record": answer.records[0].to_wire() if answer.records else None}
        if answer.left_out:
            result["left_out"] = answer.left_out
        return result


def _limit(limit: int | None, default: int, lim: Limits) -> int:
    """Raises: InvalidParams: outside [0, max_recall_limit]."""
    top = lim.max_recall_limit
    if limit is None:
        return default
    if limit == 0:
        return top  # docs/protocol.md: 0 is "as many as the store allows"
    if limit < 0 or limit > top:
        raise InvalidParams(
            f"Invalid params: {limit_out_of_range(0, top)}", data={"fields": ["limit"]}
        )
    return limit
