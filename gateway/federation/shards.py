"""`fusion: shards`: a federation's query ranked as one index holding every member's records.

Members are asked deep (their hybrid leg depth). Members in lexical mode answer a
text-only call lexically and an embedding-only call densely, so with both in the
call each leg is fanned out and merged across members (lexical calibrated, dense
by cosine), and the merged legs are fused as one store fuses them. Otherwise the
members' answers are merged calibrated.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence

from gateway.a2m.params import RecallParams
from gateway.a2m.records import Record
from gateway.config import SearchConfig, SearchMode
from gateway.federation.fanout import FanOut, Member, encoded
from gateway.federation.fusion import calibrated, fuse_legs, merge_by_score, merge_calibrated
from gateway.front.source import Answer

Asker = Callable[[RecallParams], Callable[[Member], Awaitable[Answer]]]
"""For given params, the call that asks one member (its own `where`, the caller's rights)."""


async def recall_shards(
    fan_out: FanOut,
    ask: Asker,
    deep: RecallParams,
    members: Sequence[Member],
    *,
    limit: int,
    search: SearchConfig,
) -> Answer:
    """The members' answers to `deep` (asked at the shard depth), ranked as one store's.

    `search`: the fusion settings the legs are fused by when they are split.
    """
    depth = deep.limit or 0
    split = deep.embedding is not None and all(
        m.store.config.search.mode == SearchMode.LEXICAL for m in members
    )
    if not split:
        ok, left = await fan_out.answered(ask(deep), members)
        ranked = [(encoded(o.member.name, o.result.records), o.member.weight) for o in ok]
        return Answer(merge_calibrated(ranked, limit), left)
    lex_call = ask(deep.model_copy(update={"embedding": None}))
    dense_call = ask(deep.model_copy(update={"query": None}))

    async def both(m: Member) -> tuple[Answer, Answer]:
        # Both legs finish before a failure is raised: no leg is left running.
        legs = await asyncio.gather(lex_call(m), dense_call(m), return_exceptions=True)
        for leg in legs:
            if isinstance(leg, BaseException):
                raise leg
        return legs[0], legs[1]  # type: ignore[return-value]

    ok, left = await fan_out.answered(both, members)
    lex_ranked = [(encoded(o.member.name, o.result[0].records), o.member.weight) for o in ok]
    dense_ranked = [(encoded(o.member.name, o.result[1].records), o.member.weight) for o in ok]
    records = fuse_legs(
        _calibrated_leg(calibrated(lex_ranked, depth)),
        merge_by_score(dense_ranked, depth),
        fusion=search.fusion,
        k=search.rrf_k,
        lexical_weight=search.lexical_weight,
        dense_weight=search.dense_weight,
        limit=limit,
    )
    return Answer(records, left)


def _calibrated_leg(values: list[tuple[float, Record]]) -> list[Record]:
    """The merged lexical leg, each record scored by its calibrated value (a weight-0
    member's, minus infinity, at the lowest finite value: last, but still on the scale)."""
    floor = min((c for c, _ in values if math.isfinite(c)), default=0.0)
    for c, r in values:
        r.score = c if math.isfinite(c) else floor
    return [r for _, r in values]
