"""search.per_group: the cap is exact and a recall still answers `limit` records."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from gateway.a2m.records import Record
from gateway.stages.groups import GroupCapStage, Page, cap_groups, fold, folds_of
from gateway.stages.passages import FOLD_SEPARATOR


def ranked(groups: Sequence[str | None]) -> list[Record]:
    return [Record(id=str(i), group=g, content=f"text {i}") for i, g in enumerate(groups)]


Asked = list[tuple[int, tuple[str, ...]]]


def engine(corpus: list[Record], asked: Asked, *, leaves_out: bool = True) -> Page:
    """A ranked read of ``corpus`` that notes each ask and, with ``leaves_out``, leaves out
    the groups ``without`` names, as an engine's filter does (else ignores them)."""

    async def page(size: int, without: Sequence[str] = ()) -> list[Record]:
        asked.append((size, tuple(without)))
        out = set(without) if leaves_out else set()
        return [r for r in corpus if r.group is None or r.group not in out][:size]

    return page


def test_cap_keeps_order_and_at_most_n_per_group() -> None:
    records = ranked(["a", "a", "b", "a", None, None, "b", "b", "c"])
    kept = cap_groups(records, 2, 10)
    assert [r.id for r in kept] == ["0", "1", "2", "4", "5", "6", "8"]
    assert [r.id for r in cap_groups(records, 1, 3)] == ["0", "2", "4"]


async def test_deeper_pages_until_limit_survive() -> None:
    # Ten chunks of each document, documents interleaved by tens: one page of `limit`
    # holds one group only.
    corpus = ranked([f"d{i // 10}" for i in range(200)])
    asked: list[tuple[int, tuple[str, ...]]] = []

    kept, _ = await GroupCapStage(1).read(engine(corpus, asked), 5)
    assert [r.group for r in kept] == ["d0", "d1", "d2", "d3", "d4"]
    # The deeper page leaves out the groups at the cap.
    assert asked == [(20, ()), (80, ("d0", "d1"))]


async def test_an_exhausted_engine_answers_what_there_is() -> None:
    corpus = ranked(["a"] * 30 + ["b"])
    asked: list[tuple[int, tuple[str, ...]]] = []

    kept, _ = await GroupCapStage(2).read(engine(corpus, asked), 10)
    assert [r.group for r in kept] == ["a", "a", "b"]
    assert asked == [(40, ())]


async def test_a_cap_over_few_groups_stops_when_their_records_are_all_left_out() -> None:
    # Two documents of 5,000 chunks each: without leaving their groups out, each deeper
    # page (160, 640, 2,560, 10,000) would read only chunks the cap drops.
    corpus = ranked(["a", "b"] * 5_000)
    asked: Asked = []
    kept, _ = await GroupCapStage(1).read(engine(corpus, asked), 10)
    assert [r.id for r in kept] == ["0", "1"]
    assert asked == [(40, ()), (160, ("a", "b"))]


@pytest.mark.parametrize("leaves_out", [True, False], ids=["engine-filters", "engine-ignores"])
async def test_the_cap_is_exact_whether_or_not_the_engine_leaves_groups_out(
    leaves_out: bool,
) -> None:
    # Random rankings of few and many groups and ungrouped records: the records kept are
    # those the cap keeps of the whole ranking, and the reads end no later.
    rng = random.Random(7)
    for _ in range(300):
        n_groups = rng.choice([1, 2, 3, 8, 40])
        groups = [rng.choice([*(f"g{i}" for i in range(n_groups)), None]) for _ in range(600)]
        corpus = ranked(groups)
        per_group, limit = rng.randint(1, 3), rng.randint(1, 12)
        asked: Asked = []
        kept, _ = await GroupCapStage(per_group).read(
            engine(corpus, asked, leaves_out=leaves_out), limit
        )
        assert [r.id for r in kept] == [r.id for r in cap_groups(corpus, per_group, limit)]
        plain: Asked = []
        await GroupCapStage(per_group).read(engine(corpus, plain, leaves_out=False), limit)
        assert len(asked) <= len(plain)


async def test_folds_come_from_the_first_page_when_deeper_ones_leave_groups_out() -> None:
    corpus = ranked(["a", "a", "b", "a"] + ["a"] * 200 + ["c"])
    kept, folds = await GroupCapStage(1).read(engine(corpus, []), 4)
    assert [r.group for r in kept] == ["a", "b", "c"]
    # "1" and "3" ranked within the first 4 and were left out by the cap: folded.
    assert [[r.id for r in f] for f in folds] == [["1", "3"], [], []]


async def test_a_cap_of_limit_or_more_reads_one_page_of_limit() -> None:
    async def page(size: int, without: Sequence[str] = ()) -> list[Record]:
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

    async def page(size: int, without: Sequence[str] = ()) -> list[Record]:
        return corpus[:size]

    kept, folds = await GroupCapStage(1, fold=False).read(page, 3)
    assert [r.id for r in kept] == ["0", "2"]
    assert folds == [[], []]
    kept, folds = await GroupCapStage(1).read(page, 3)
    assert [[r.id for r in f] for f in folds] == [["1"], []]
