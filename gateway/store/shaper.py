"""Result shaper: engine hits -> A2M records -> the wire result.

Mapping, the exact `where` check, score clamping and ordering, min_score and
prompt rendering: everything between what the engine answered and what the
caller reads.
"""

from __future__ import annotations

import math
from typing import Any

from connectors.base import Hit
from gateway.a2m.params import PromptOptions, WhereValue
from gateway.a2m.records import Record
from gateway.front.prompt import check_options, render, wanted
from gateway.store.mapping import RecordMapper
from gateway.store.planner import exact_checks

_RECORD_FIELDS = frozenset({"id", "content", "key", "group", "role", "uri", "media_type", "owner"})


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
        self, hits: list[Hit], where: dict[str, WhereValue] | None, *, with_embedding: bool
    ) -> list[Record]:
        """The hits as records, keeping only those that meet `where` exactly.

        An engine may only approximate `where`: content, and any analysed text field
        without an exact sub-field, is matched as a phrase. A2M's where is equality,
        so what the engine let through is checked here (arrays match any element).
        """
        records = [self.mapper.to_record(h, with_embedding=with_embedding) for h in hits]
        checks = exact_checks(where)
        if not checks:
            return records
        return [r for r in records if all(_holds(r, n, w) for n, w in checks)]

    @staticmethod
    def ranked(records: list[Record], min_score: float | None, limit: int) -> list[Record]:
        """Scores clamped to [0, 1], descending, at least min_score, at most limit."""
        for r in records:
            r.score = _clamp(r.score)
        records.sort(key=lambda r: -(r.score or 0.0))
        if min_score is not None:
            records = [r for r in records if (r.score or 0.0) >= min_score]
        return records[:limit]

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


def _holds(record: Record, name: str, wanted: set[str]) -> bool:
    if name in _RECORD_FIELDS:
        value: Any = getattr(record, name)
    else:
        value = (record.metadata or {}).get(name)
    values = value if isinstance(value, list) else [value]
    # Non-string values (numbers, booleans) were matched by the engine exactly.
    return any(not isinstance(v, str) or v in wanted for v in values if v is not None)


def _clamp(score: float | None) -> float:
    if score is None or not math.isfinite(score):
        return 0.0
    return min(1.0, max(0.0, score))
