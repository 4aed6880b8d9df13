"""search.per_group: the cap is exact and a recall still answers `limit` records."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.a2m.records import Record
from gateway.stages.groups import GroupCapStage, cap_groups, fold, folds_of
from gateway.stages.passages import FOLD_SEPARATOR


def ranked(groups: Sequence[str | None]) -> list[Record]:
    return [Record(id=str(i), group=g, content=f"text {i}") for i, g in enumerate(groups)]


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

    kept, _ = await GroupCapStage(1).read(page, 5)
    assert [r.group for r in kept] == ["d0", "d1", "d2", "d3", "d4"]
    assert asked == [20, 80]


async def test_an_exhausted_engine_answers_what_there_is() -> None:
    corpus = ranked(["a"] * 30 + ["b"])
    asked: list[int] = []

    async def page(size: int) -> list[Record]:
        asked.append(size)
        return corpus[:size]

    kept, _ = await GroupCapStage(2).read(page, 10)
    assert [r.group for r in kept] == ["a", "a", "b"]
    assert asked == [40]


async def test_a_cap_of_limit_or_more_reads_one_page_of_limit() -> None:
    async def page(size: int) -> list[Record]:
        assert size == 3
        return ranked(["a"] * size)

    kept, folds = await GroupCapStage(3).read(page, 3)
    assert len(kept) == 3
    assert folds == [[], [], []]


def test_what_the_cap_leaves_out_within_limit_folds_into_its_groups_first_record() -> None:
    records = ranked(["a", "a", "b", "a", None, "b", "c", "a"])
    kept = cap_groups(records, 1, 4)
    assert [r.id for r in kept] == ["0", "2", "4", "6"]
    folds = folds_of(records, kept, 4)
    # Within the first 4: "1" and "3" (group a) were left out; "5" and "7" rank below.
    assert [[r.id for r in f] for f in folds] == [["1", "3"], [], [], []]
    folds = folds_of(records, cap_groups(records, 2, 4), 4)
    assert [[r.id for r in f] for f in folds] == [["3"], [], [], []]


def test_fold_appends_the_texts_and_says_where_each_sits() -> None:
    head = Record(id="1", content="first part", key="k/1", metadata={"x": 1})
    second = Record(id="2", content="second", uri="https://x.org/2")
    third = Record(id="3", content="third one", metadata={"passage": {"offsets": [[4, 13]]}})
    fold(head, [second, third])
    assert head.content is not None
    assert head.metadata is not None
    assert head.content == FOLD_SEPARATOR.join(["first part", "second", "third one"])
    chunks = head.metadata["chunks"]
    assert [c["id"] for c in chunks] == ["1", "2", "3"]
    for chunk, text in zip(chunks, ["first part", "second", "third one"], strict=True):
        start, end = chunk["range"]
        assert head.content[start:end] == text
    assert chunks[0]["key"] == "k/1"
    assert chunks[1]["uri"] == "https://x.org/2"
    assert chunks[2]["passage"] == {"offsets": [[4, 13]]}
    assert head.metadata["x"] == 1
    alone = Record(id="9", content="alone")
    fold(alone, [])
    assert alone.content == "alone"
    assert alone.metadata is None


async def test_unfolded_the_cap_drops_what_it_leaves_out() -> None:
    corpus = ranked(["a", "a", "b"])

    async def page(size: int) -> list[Record]:
        return corpus[:size]

    kept, folds = await GroupCapStage(1, fold=False).read(page, 3)
    assert [r.id for r in kept] == ["0", "2"]
    assert folds == [[], []]
    kept, folds = await GroupCapStage(1).read(page, 3)
    assert [[r.id for r in f] for f in folds] == [["1"], []]
