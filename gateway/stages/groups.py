"""``search.per_group``: at most N records of one ``group`` per recall, without losing ``limit``.

Exact in the gateway whatever the engine does: the engine is asked for a deeper
page (x4 the limit, then x4 again) until ``limit`` records survive the cap or the
engine has no more. A record without a group is a group of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.a2m.records import Record
from gateway.store.paging import MAX_FETCH

DEPTH_FACTOR = 4
"""How much deeper each page asks than the one before (the first: ``limit`` x this)."""


def cap_groups(records: list[Record], per_group: int, limit: int) -> list[Record]:
    """The first ``limit`` records, in order, keeping at most ``per_group`` of each group."""
    seen: dict[str, int] = {}
    kept: list[Record] = []
    for record in records:
        if record.group is not None:
            n = seen.get(record.group, 0)
            if n >= per_group:
                continue
            seen[record.group] = n + 1
        kept.append(record)
        if len(kept) == limit:
            break
    return kept


class GroupCapStage:
    """Caps records per group; reads deeper pages until ``limit`` survive."""

    name = "per_group"

    def __init__(self, per_group: int) -> None:
        self.per_group = per_group

    def describe(self) -> dict[str, object]:
        return {"stage": self.name, "per_group": self.per_group}

    async def read(
        self, page: Callable[[int], Awaitable[list[Record]]], limit: int
    ) -> list[Record]:
        """``limit`` records capped per group, from pages of growing size.

        ``page(size)`` answers at most ``size`` records in the engine's order; fewer
        than asked means the engine has no more.
        """
        # Within the first `limit` no group can pass a cap of `limit` or more.
        size = limit if self.per_group >= limit else min(MAX_FETCH, limit * DEPTH_FACTOR)
        while True:
            records = await page(size)
            kept = cap_groups(records, self.per_group, limit)
            if len(kept) >= limit or len(records) < size or size >= MAX_FETCH:
                return kept
            size = min(MAX_FETCH, size * DEPTH_FACTOR)
