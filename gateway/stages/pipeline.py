"""The stages a store runs after retrieval, built once from its ``search`` config."""

from __future__ import annotations

from gateway.a2m.records import Record
from gateway.config.search import SearchConfig, SearchMode
from gateway.stages.groups import GroupCapStage, Page, fold
from gateway.stages.passages import PassageStage


class Stages:
    """The store's stages in order: fusion (in the connector), group cap, passages (and the
    page re-ordered by its passages, ``passages.rank``); then the records the cap folded
    are merged into their group's kept record."""

    def __init__(self, search: SearchConfig, *, engine_passages: bool = False) -> None:
        """``engine_passages``: the store's engine chooses the passages (its highlighter)."""
        self._fusion = search.fusion if search.mode is SearchMode.HYBRID else None
        self.group_cap = (
            GroupCapStage(search.per_group, search.fold_groups) if search.per_group else None
        )
        passages = search.passages
        self.passages = None
        if passages and passages.enabled:
            # Unset, the rank is off where the engine already ranks each document by its best
            # passage (nested passages' kNN leg): there it ranked worse.
            rank = passages.ranks(search.ranks_by_passage)
            self.passages = PassageStage(passages, by_engine=engine_passages, rank=rank)

    def describe(self) -> list[dict[str, object]]:
        """describe's ``search.stages``: what runs on this store, in order."""
        out: list[dict[str, object]] = []
        if self._fusion is not None:
            out.append({"stage": "fusion", "method": self._fusion})
        if self.group_cap is not None:
            out.append(self.group_cap.describe())
        if self.passages is not None:
            out.append(self.passages.describe())
            rank = self.passages.describe_rank()
            if rank is not None:
                out.append(rank)
        return out

    async def recall(self, page: Page, limit: int, query: str | None) -> list[Record]:
        """The engine's records for a recall of ``limit``, through each stage that is on.

        ``page(size)`` reads at most ``size`` ranked records from the engine
        (groups.Page).
        """
        if self.group_cap is None:
            records, folds = await page(limit), None
        else:
            records, folds = await self.group_cap.read(page, limit)
        if self.passages is not None and query:
            self.passages.apply(records, query, folds)
        if folds:
            for record, folded in zip(records, folds, strict=True):
                fold(record, folded)
        return records
