"""``search.per_group``: at most N records of one ``group`` per recall, without losing ``limit``.

Exact in the gateway whatever the engine does: the engine is asked for a deeper
page (x4 the limit, then x4 again) until ``limit`` records survive the cap or the
engine has no more. Each deeper page leaves out the groups already at the cap (the
engine's filter, where it can match the group field exactly): their further records
would all be dropped, so a cap over few groups ends as soon as those are exhausted
instead of reading thousands of their records. A record without a group is never
capped.

Folding (``search.fold_groups``, on by default): a record the cap leaves out that
ranked within the engine's first ``limit`` is not lost but folded into its group's
best kept record, whose content then holds both texts (``metadata.chunks`` says
which record's text sits where). So a capped recall returns every text a plain
recall of ``limit`` would have, and more documents: a document's best-ranked chunk
is not always the one that answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Protocol

from gateway.a2m.records import Record
from gateway.stages.passages import FOLD_SEPARATOR
from gateway.store.paging import MAX_FETCH

DEPTH_FACTOR = 4
"""How much deeper each page asks than the one before (the first: ``limit`` x this)."""

Folds = list[list[Record]]
"""Per kept record (same order), the records folded into it, best-ranked first."""


class Page(Protocol):
    """A store's ranked read for the cap."""

    def __call__(self, size: int, without: Sequence[str] = (), /) -> Awaitable[list[Record]]:
        """At most ``size`` records in the engine's order, fewer when the engine has no
        more; ``without``: groups whose records may be left out (the engine's filter,
        where it can match them exactly)."""
        ...


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


def full_groups(kept: list[Record], per_group: int) -> list[str]:
    """The groups that hold ``per_group`` of ``kept`` (no further record of theirs is kept)."""
    counts: dict[str, int] = {}
    for record in kept:
        if record.group is not None:
            counts[record.group] = counts.get(record.group, 0) + 1
    return [group for group, n in counts.items() if n >= per_group]


def merged(ranked: list[Record], deeper: list[Record]) -> list[Record]:
    """``ranked`` followed by the records of ``deeper`` (a deeper page of the same ranking,
    some groups left out) it does not hold yet, in their order."""
    seen = {(r.id, r.key, r.group) for r in ranked}
    return ranked + [r for r in deeper if (r.id, r.key, r.group) not in seen]


def folds_of(records: list[Record], kept: list[Record], limit: int) -> Folds:
    """Per kept record, the records of ``records[:limit]`` the cap left out that belong to
    its group, for the group's first kept record (the others get none)."""
    out: Folds = [[] for _ in kept]
    first: dict[str, int] = {}
    for i, record in enumerate(kept):
        if record.group is not None:
            first.setdefault(record.group, i)
    chosen = {id(r) for r in kept}
    for record in records[:limit]:
        if id(record) not in chosen and record.group is not None and record.group in first:
            out[first[record.group]].append(record)
    return out


def fold(record: Record, folded: list[Record]) -> None:
    """``record``'s content followed by each of ``folded``'s (FOLD_SEPARATOR between);
    ``metadata.chunks`` lists each record whose text it holds: ``id``, ``key``/``uri``
    where set, ``range`` ([start, end) characters of this content) and ``passage``
    where that record's text was cut to passages."""
    if not folded:
        return
    parts: list[str] = []
    chunks: list[dict[str, object]] = []
    at = 0
    for r in [record, *folded]:
        text = r.content or ""
        if parts:
            at += len(FOLD_SEPARATOR)
        entry: dict[str, object] = {"id": r.id, "range": [at, at + len(text)]}
        if r.key is not None:
            entry["key"] = r.key
        if r.uri is not None:
            entry["uri"] = r.uri
        if r.metadata and "passage" in r.metadata:
            entry["passage"] = r.metadata["passage"]
        chunks.append(entry)
        parts.append(text)
        at += len(text)
    record.content = FOLD_SEPARATOR.join(parts)
    record.metadata = {**(record.metadata or {}), "chunks": chunks}


class GroupCapStage:
    """Caps records per group; reads deeper pages until ``limit`` survive."""

    name = "per_group"

    def __init__(self, per_group: int, fold: bool = True) -> None:
        self.per_group = per_group
        self.fold = fold

    def describe(self) -> dict[str, object]:
        return {"stage": self.name, "per_group": self.per_group, "fold": self.fold}

    async def read(self, page: Page, limit: int) -> tuple[list[Record], Folds]:
        """``limit`` records capped per group, from pages of growing size, and what folds
        into each (all empty when folding is off).

        The first page is the engine's ranking; each deeper one leaves out the groups
        at the cap, and its records the pages before did not hold follow theirs: the
        ranking's next records but those the cap would drop.
        """
        # Within the first `limit` no group can pass a cap of `limit` or more.
        size = limit if self.per_group >= limit else min(MAX_FETCH, limit * DEPTH_FACTOR)
        first = ranked = last = await page(size)
        kept = cap_groups(ranked, self.per_group, limit)
        while len(kept) < limit and len(last) >= size and size < MAX_FETCH:
            size = min(MAX_FETCH, size * DEPTH_FACTOR)
            last = await page(size, full_groups(kept, self.per_group))
            ranked = merged(ranked, last)
            kept = cap_groups(ranked, self.per_group, limit)
        if not self.fold:
            return kept, [[] for _ in kept]
        # The first page holds the ranking's first `limit`, whatever the cap left out.
        return kept, folds_of(first, kept, limit)
