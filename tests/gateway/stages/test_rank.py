"""The page re-ordered by its records' best passage paragraphs (``search.passages.rank``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from gateway.a2m.records import Record
from gateway.config.engines import LuceneSearchConfig
from gateway.stages.config import PassagesConfig
from gateway.stages.passages import SECTION_CHARS, PassageStage, query_terms, sectioned, selected
from gateway.stages.pipeline import Stages
from gateway.stages.rank import best_paragraph_scores, fused_order, paragraphs_of, scanned

FILLER = "Nothing of note is said in this sentence at all. " * 6


def _document(*paragraphs: str) -> str:
    return "\n\n".join(f"Section {i}\n{FILLER}{p} {FILLER}" for i, p in enumerate(paragraphs))


# The question's three terms spread over three sections: the whole document matches all
# of them, no one section answers.
SPREAD = _document(
    "Vitamin levels were measured.", "Bone density was recorded.", "Fractures were counted."
)
# One section answers with all three; the others say nothing.
ANSWER = _document("Filler.", "Vitamin D deficiency raises the risk of bone fractures.", "More.")
QUERY = "vitamin bone fractures"


def test_paragraphs_of_the_spans_each_once_and_joined_across_a_blank_line() -> None:
    text = "one a\n\ntwo b\n\nthree c"
    two, three = text.index("two"), text.index("three")
    assert paragraphs_of(text, [(two, two + 3), (two + 4, two + 5)]) == [(two, two + 5)]
    assert paragraphs_of(text, [(0, 3), (three, len(text))]) == [(0, 5), (three, len(text))]
    # A span running over a blank line: the paragraphs it joins, as one.
    assert paragraphs_of(text, [(two, three + 2)]) == [(two, len(text))]
    assert paragraphs_of(text, []) == [(0, len(text))]
    assert paragraphs_of("", []) == []


def test_a_section_that_answers_outscores_terms_spread_over_sections() -> None:
    wanted = query_terms(QUERY)
    spread, answer, none = best_paragraph_scores(
        [scanned(t, [], wanted) for t in (SPREAD, ANSWER, "no term here")]
    )
    # Whole texts as one paragraph each: the spread document holds every term too.
    assert spread > 0
    assert answer > 0
    assert none == 0.0
    # Each paragraph apart: only the answering section holds all three.
    sections = [[(s, s + 1)] for s in range(0, len(SPREAD), 400)]
    at = ANSWER.index("Vitamin D")
    best_spread = best_paragraph_scores(
        [
            scanned(SPREAD, [p for s in sections for p in s], wanted),
            scanned(ANSWER, [(at, at + 1)], wanted),
        ]
    )
    assert best_spread[1] > best_spread[0] > 0


def test_fused_order_keeps_agreement_and_breaks_ties_by_the_engines_order() -> None:
    assert fused_order([3.0, 2.0, 1.0]) == [0, 1, 2]
    assert fused_order([0.0, 0.0, 0.0]) == [0, 1, 2]
    # The last by the engine but first by its paragraph ties with the first (1/61 + 1/63
    # both): the engine's order breaks it; the middle one drops below both.
    assert fused_order([1.0, 2.0, 3.0]) == [0, 2, 1]
    # Ten records: the engine's sixth, first by its paragraph, passes the third to fifth.
    scores = [5.0, 4.0, 3.0, 2.0, 1.0, 9.0, 0.0, 0.0, 0.0, 0.0]
    assert fused_order(scores) == [0, 1, 5, 2, 3, 4, 6, 7, 8, 9]


def test_the_stage_moves_the_record_whose_section_answers_up_with_its_folds() -> None:
    def page() -> tuple[list[Record], list[list[Record]]]:
        records = [Record(id=str(i), content=SPREAD) for i in range(3)]
        records.append(Record(id="answer", content=ANSWER))
        return records, [[Record(id=f"f{r.id}", content="folded")] for r in records]

    config = PassagesConfig(max_chars=400, count=2, rank=False)
    records, folds = page()
    PassageStage(config).apply(records, QUERY, folds)
    assert [r.id for r in records] == ["0", "1", "2", "answer"]  # rank off: as read

    records, folds = page()
    PassageStage(PassagesConfig(max_chars=400, count=2)).apply(records, QUERY, folds)
    assert [r.id for r in records] == ["0", "answer", "1", "2"]
    assert [f[0].id for f in folds] == ["f0", "fanswer", "f1", "f2"]
    assert records[1].content is not None
    assert "Vitamin D deficiency raises the risk of bone fractures." in records[1].content


def test_the_stage_ranks_by_the_engines_passages_of_a_whole_content() -> None:
    # As the mapper gives a hit whose passages the engine chose: whole, with offsets.
    at = ANSWER.index("Vitamin D")
    spans = [[at, at + 55]]
    answer = Record(
        id="answer", content=ANSWER, metadata={"passage": {"offsets": spans, "length": len(ANSWER)}}
    )
    first = SPREAD.index("Vitamin levels")
    records = [
        Record(
            id=str(i),
            content=SPREAD,
            metadata={"passage": {"offsets": [[first, first + 29]], "length": len(SPREAD)}},
        )
        for i in range(3)
    ]
    records.append(answer)
    stage = PassageStage(PassagesConfig(rank=True), by_engine=True)
    stage.apply(records, QUERY)
    assert [r.id for r in records] == ["0", "answer", "1", "2"]
    assert answer.content == ANSWER[at : at + 55]
    assert records[0].content == SPREAD[first : first + 29]


def test_the_engines_passages_are_ranked_by_the_paragraph_of_its_best_one() -> None:
    # Each record's passages lie in the answering section and in a filler one; the rank
    # scores the paragraph of the passage the engine ranked first (``best``).
    at, filler = ANSWER.index("Vitamin D"), ANSWER.index("Nothing")
    spans = [[filler, filler + 20], [at, at + 55]]

    def page(best: int) -> list[Record]:
        where = {"passage": {"offsets": spans, "length": len(ANSWER), "best": best}}
        first = SPREAD.index("Vitamin levels")
        one = {"passage": {"offsets": [[first, first + 29]], "length": len(SPREAD), "best": 0}}
        records = [Record(id=str(i), content=SPREAD, metadata=dict(one)) for i in range(3)]
        return [*records, Record(id="answer", content=ANSWER, metadata=where)]

    for best, order in ((1, ["0", "answer", "1", "2"]), (0, ["0", "1", "2", "answer"])):
        records = page(best)
        PassageStage(PassagesConfig(), by_engine=True).apply(records, QUERY)
        assert [r.id for r in records] == order, best


def test_only_a_page_of_records_of_several_paragraphs_each_is_re_ordered() -> None:
    # Chunks of one section each, or such chunks beside a document of sections: the page
    # keeps the engine's order; the same texts as documents of sections are re-ordered.
    def flat(text: str) -> str:
        return text.replace("\n\n", " ")

    def titled(text: str) -> str:  # a chunk under a title line: still one section
        return "A title line\n\n" + flat(text) + "\n\n"

    shapes: list[tuple[Callable[[str], str], Callable[[str], str], list[str]]] = [
        (flat, flat, ["0", "1", "2", "answer"]),
        (titled, titled, ["0", "1", "2", "answer"]),
        (flat, str, ["0", "1", "2", "answer"]),
        (str, str, ["0", "answer", "1", "2"]),
    ]
    for spread, answer, order in shapes:
        records = [Record(id=str(i), content=spread(SPREAD)) for i in range(3)]
        records.append(Record(id="answer", content=answer(ANSWER)))
        PassageStage(PassagesConfig(max_chars=400, count=2)).apply(records, QUERY)
        assert [r.id for r in records] == order


def test_a_text_is_sectioned_by_two_paragraphs_of_a_sections_length() -> None:
    body, section = "x" * SECTION_CHARS, "y" * (SECTION_CHARS - 1)
    assert sectioned(f"{body}\n\n{body}")
    assert sectioned(f"Title\n\n{body}\n\n\n\n{body}\n\nEnd")
    assert not sectioned(f"Title\n\n{body}")  # one section under a heading
    assert not sectioned(f"{body}\n\n")  # a blank line at the end
    assert not sectioned(f"{body}\n\n{section}")
    assert not sectioned(f"{body}\n{body}")  # one paragraph of two lines
    assert not sectioned("")
    assert not sectioned(None)


def test_describe_lists_the_rank_after_the_passages_only_when_it_is_on() -> None:
    on = LuceneSearchConfig.model_validate({"text_fields": ["t"], "passages": {"rank": True}})
    assert Stages(on, engine_passages=True).describe() == [
        {"stage": "passages", "by": "engine", "max_chars": 600, "count": 4},
        {"stage": "rank", "by": "best_paragraph", "k": 60},
    ]
    off = LuceneSearchConfig.model_validate({"text_fields": ["t"], "passages": {"rank": False}})
    assert [s["stage"] for s in Stages(off).describe()] == ["passages"]
    default = LuceneSearchConfig.model_validate({"text_fields": ["t"], "passages": {}})
    assert [s["stage"] for s in Stages(default).describe()] == ["passages", "rank"]


def test_a_recall_through_the_stages_comes_back_re_ordered() -> None:
    search = LuceneSearchConfig.model_validate(
        {"text_fields": ["t"], "passages": {"rank": True, "max_chars": 400, "count": 2}}
    )

    async def read(size: int, without: Sequence[str] = ()) -> list[Record]:
        return [Record(id=i, content=SPREAD) for i in "ab"] + [Record(id="c", content=ANSWER)]

    got = asyncio.run(Stages(search).recall(read, 10, QUERY))
    assert [r.id for r in got] == ["a", "c", "b"]
    # No query text: nothing to rank by, the page as read.
    assert [r.id for r in asyncio.run(Stages(search).recall(read, 10, None))] == ["a", "b", "c"]


def test_the_re_ordered_page_keeps_its_scores_descending() -> None:
    records = [Record(id=str(i), content=SPREAD, score=0.9 - i / 10) for i in range(3)]
    records.append(Record(id="answer", content=ANSWER, score=0.6))
    PassageStage(PassagesConfig(max_chars=400, count=2, rank=True)).apply(records, QUERY)
    assert [r.id for r in records] == ["0", "answer", "1", "2"]
    assert [r.score for r in records] == [0.9, 0.8, 0.7, 0.6]
    # A page without scores (none to give out) is only re-ordered.
    bare = [Record(id=str(i), content=SPREAD) for i in range(3)]
    bare.append(Record(id="answer", content=ANSWER))
    PassageStage(PassagesConfig(max_chars=400, count=2, rank=True)).apply(bare, QUERY)
    assert [(r.id, r.score) for r in bare] == [
        ("0", None),
        ("answer", None),
        ("1", None),
        ("2", None),
    ]


@pytest.mark.parametrize("accent", ["", "Étude de la densité osseuse. "])
def test_the_selections_own_hits_count_each_paragraph_as_a_scan_of_it_does(accent: str) -> None:
    # A selection's passages (gateway.stages.passages.selected) and the paragraphs they
    # lie in, counted from the hits it found in the whole text, as scanning them anew
    # counts them: in an ASCII text and in one of several bytes a character.
    text = accent + _document(
        "Vitamin D deficiency and bone loss.", "Fractures of the hip.", "Bone bones boned."
    )
    config = PassagesConfig(max_chars=300, count=3)
    wanted = query_terms("vitamin bone fractures hip")
    spans, _, units = selected(text, config, wanted, units=True)
    assert units is not None
    assert len(spans) == 3
    assert units == scanned(text, [(s.start, s.end) for s in spans], wanted)
    assert sum(sum(counts.values()) for counts, _ in units) >= 3
