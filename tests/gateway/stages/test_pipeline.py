"""The stage list: empty when nothing is configured, so a recall is the engine's page."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from gateway.a2m.records import Record
from gateway.config.engines import LuceneSearchConfig
from gateway.stages.pipeline import Stages


def test_without_passages_or_per_group_no_stage_runs_and_the_page_is_returned_as_read() -> None:
    stages = Stages(LuceneSearchConfig(text_fields=["t"]))
    assert stages.describe() == []
    assert stages.passages is None
    assert stages.group_cap is None
    content = "A long text. " * 200
    page = [Record(id="1", content=content), Record(id="2", content=content)]
    asked: list[int] = []

    async def read(size: int, without: Sequence[str] = ()) -> list[Record]:
        asked.append(size)
        return page

    got = asyncio.run(stages.recall(read, 10, "long text"))
    assert got is page
    assert asked == [10]
    assert [r.content for r in got] == [content, content]
    assert all(r.metadata is None for r in got)


def test_with_passages_the_stage_is_listed_and_cuts_long_contents() -> None:
    search = LuceneSearchConfig.model_validate({"text_fields": ["t"], "passages": {}})
    stages = Stages(search)
    assert stages.describe() == [
        {"stage": "passages", "max_chars": 600, "count": 4, "unit": "sentence"},
        {"stage": "rank", "by": "best_paragraph", "k": 60},
    ]
    content = "Filler words about nothing. " * 100 + "The answer is here. " + "More. " * 100

    async def read(size: int, without: Sequence[str] = ()) -> list[Record]:
        return [Record(id="1", content=content)]

    [record] = asyncio.run(stages.recall(read, 10, "answer"))
    assert record.content is not None
    assert "The answer is here." in record.content
    assert len(record.content) <= 600
    assert record.metadata is not None
    assert record.metadata["passage"]["length"] == len(content)


def test_a_capped_groups_folded_records_share_the_passage_cap() -> None:
    search = LuceneSearchConfig.model_validate(
        {"text_fields": ["t"], "passages": {}, "per_group": 1}
    )
    stages = Stages(search)
    assert [s["stage"] for s in stages.describe()] == ["per_group", "passages", "rank"]
    filler = "Filler words about nothing. " * 60

    def chunk(i: int, group: str, answer: str) -> Record:
        return Record(id=str(i), group=group, content=filler + answer + " " + filler)

    page = [
        chunk(0, "a", "The answer is in chunk zero."),
        chunk(1, "a", "The answer is in chunk one too."),
        chunk(2, "b", "Another answer lives here."),
        chunk(3, "a", "An answer ranked below the limit."),
    ]

    async def read(size: int, without: Sequence[str] = ()) -> list[Record]:
        return page[:size]

    records = asyncio.run(stages.recall(read, 2, "answer chunk"))
    assert [r.id for r in records] == ["0", "2"]
    first = records[0]
    assert first.content is not None
    assert first.metadata is not None
    assert len(first.content) <= 600
    assert "chunk zero" in first.content
    assert "chunk one" in first.content  # folded: it ranked within the limit
    assert "below the limit" not in first.content
    [own, folded] = first.metadata["chunks"]
    assert (own["id"], folded["id"]) == ("0", "1")
    start, end = folded["range"]
    whole = filler + "The answer is in chunk one too. " + filler
    assert first.content[start:end] == " … ".join(
        whole[a:b] for a, b in folded["passage"]["offsets"]
    )
    assert records[1].metadata is not None
    assert "chunks" not in records[1].metadata


def test_the_rank_is_off_by_default_where_the_knn_leg_ranks_by_the_best_passage() -> None:
    def stages(nested: bool, mode: str = "hybrid", **passages: object) -> list[object]:
        search: dict[str, object] = {
            "mode": mode,
            "text_fields": ["text"],
            "vector_field": "s.v" if nested else "v",
            "embedder": {"kind": "minilm"},
            "passages": passages,
        }
        if nested:
            search["nested_passages"] = {"path": "s", "text_field": "s.t"}
        config = LuceneSearchConfig.model_validate(search)
        return [s["stage"] for s in Stages(config, engine_passages=True).describe()]

    assert stages(nested=False) == ["fusion", "passages", "rank"]
    assert stages(nested=True) == ["fusion", "passages"]
    assert stages(nested=True, rank=True) == ["fusion", "passages", "rank"]
    assert stages(nested=False, rank=False) == ["fusion", "passages"]
    # A lexical store too: a recall may ask it for a hybrid search, its kNN leg the nested one.
    assert stages(nested=True, mode="lexical") == ["passages"]
