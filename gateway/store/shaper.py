"""Result shaper: engine hits -> A2M records -> the wire result.

Mapping, the exact `where` check, min_score and prompt rendering: everything
between what the engine answered and what the caller reads. Scores are the
connector's (normalised into [0, 1], best first, by connectors.fusion): they
are kept as they are, never rescaled or re-sorted here.
"""

from __future__ import annotations

from typing import Any

from connectors.base import Hit
from gateway.a2m.params import PromptOptions
from gateway.a2m.records import Record
from gateway.front.prompt import check_options, render, wanted
from gateway.store.mapping import RecordMapper
from gateway.store.planner import ExactMatch


class ResultShaper:
    def __init__(self, mapper: RecordMapper, max_prompt_budget: int) -> None:
        self.mapper = mapper
        self._max_prompt_budget = max_prompt_budget

    def prompt_options(self, options: PromptOptions | None) -> PromptOptions | None:
        """Raises: InvalidParams: prompt options beyond the store's budget or unknown."""
        if options is not None:
            check_options(options, self._max_prompt_budget)
        return options

    def records(
        self,
        hits: list[Hit],
        exact: ExactMatch | None,
        *,
        with_embedding: bool,
        ranked: bool = False,
    ) -> list[Record]:
        """The hits as records (scored when `ranked`), keeping those that meet `exact`."""
        to_record = self.mapper.to_record
        records = [to_record(h, with_embedding=with_embedding, ranked=ranked) for h in hits]
        return records if exact is None else [r for r in records if exact(r)]

    @staticmethod
    def at_least(records: list[Record], min_score: float | None) -> list[Record]:
        """The records scoring at least `min_score`, in their order."""
        if min_score is None:
            return records
        return [r for r in records if (r.score or 0.0) >= min_score]

    @staticmethod
    def result(
        records: list[Record], options: PromptOptions | None, *, prefer_newest: bool = False
    ) -> dict[str, Any]:
        result: dict[str, Any] = {"records": [r.to_wire() for r in records]}
        if wanted(options):
            assert options is not None
            rendered = render(records, options, prefer_newest=prefer_newest)
            result["prompt"] = rendered.text
            result["prompt_ids"] = rendered.ids
        return result
