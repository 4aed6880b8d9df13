"""Result shaper: engine hits -> A2M records.

Mapping and the exact `where` check: everything between what the engine
answered and the records the front shapes for the caller. Scores are the
connector's (normalised into [0, 1], best first, by connectors.fusion): they
are kept as they are, never rescaled or re-sorted here.
"""

from __future__ import annotations

from connectors.base import Hit
from gateway.a2m.records import Record
from gateway.store.mapping import RecordMapper
from gateway.store.planner import ExactMatch


class ResultShaper:
    def __init__(self, mapper: RecordMapper) -> None:
        self.mapper = mapper

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
