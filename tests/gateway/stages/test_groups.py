"""search.per_group: the cap is exact and a recall still answers `limit` records."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.a2m.records import Record
from gateway.stages.groups import GroupCapStage, cap_groups


def ranked(groups: Sequence[str | None]) -> list[Record]:
    return [Record(id=str(i), group=g) for i, g in enumerate(groups)]


def test_cap_keeps_order_and_at_most_n_per_group() -> None:
    records = ranked(["a", "a", "b", "a", None, None, "b", "b", "c"])
    kept = cap_groups(records, 2, 10)
    assert [r.id for r in kept] == ["0", "1", "2", "4", "5", "6", "8"]
    assert [r.id for r in cap_groups(records, 1, 3)] == ["0", "2", "4"]


async def test_deeper_pages_until_limit_survive() -> None:
    # Ten chunks of each document, documents interleaved by tens: one page of `limit`
    # holds one group only.
    corpus = ranked([f"d{i // 10}" for i in range(200)])
    asked: list[int] = []

    async def page(size: int) -> list[Record]:
        asked.append(size)
        return corpus[:size]

    kept = await GroupCapStage(1).read(page, 5)
    assert [r.group for r in kept] == ["d0", "d1", "d2", "d3", "d4"]
    assert asked == [20, 80]


async def test_an_exhausted_engine_answers_what_there_is() -> None:
    corpus = ranked(["a"] * 30 + ["b"])
    asked: list[int] = []

    async def page(size: int) -> list[Record]:
        asked.append(size)
        return corpus[:size]

    kept = await GroupCapStage(2).read(page, 10)
    assert [r.group for r in kept] == ["a", "a", "b"]
    assert asked == [40]


async def test_a_cap_of_limit_or_more_reads_one_page_of_limit() -> None:
    async def page(size: int) -> list[Record]:
        assert size == 3
        return ranked(["a"] * size)

    assert len(await GroupCapStage(3).read(page, 3)) == 3
