"""Unit tests of the engine's passages (connectors.lucene.passages): no engine needed.

The request each body carries (the highlight, what ``_source`` reads), and how the
fragments an engine answers become exact spans of the content.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from connectors.base import Condition, Filter, Hit, SearchRequest
from connectors.fusion import clamp01
from connectors.lucene.connector import dialect_for, knn_body
from connectors.lucene.hybrid import HybridPlanner, reread_body
from connectors.lucene.mapping import not_indexed
from connectors.lucene.passages import (
    ANALYSED_CHARS,
    CANDIDATES_PER_PASSAGE,
    analysed_bound,
    choose,
    cut,
    highlight_clause,
    locate,
    passages_of,
    widen,
)
from connectors.lucene.query import QueryTranslator
from connectors.spec import PassageSpec
from connectors.text import paragraph_breaks
from tests.connectors.test_lucene import store

SPEC = PassageSpec(max_chars=120, count=2, fragment_chars=57)
SCOPE = {"term": {"acl": {"value": "team-a"}}}
PASSAGES: dict[str, Any] = {"passages": SPEC}


def _translator(engine: str = "elasticsearch", **search: Any) -> QueryTranslator:
    return QueryTranslator(store(backend=engine, search={"vector_field": "embedding", **search}))


def _request(**kw: Any) -> SearchRequest:
    scoped = Filter(must=(Condition("acl", ("team-a",)),))
    return SearchRequest(limit=10, filter=scoped, passage_text="bone fractures", **kw)


def test_the_highlight_asks_for_scored_untagged_sentences_and_a_head_without_a_match() -> None:
    clause = highlight_clause("text", SPEC, "bone fractures")
    assert clause["pre_tags"] == clause["post_tags"] == [""]
    # A field longer than the index's bound is highlighted in its head, not refused.
    assert clause["max_analyzed_offset"] == ANALYSED_CHARS
    assert highlight_clause("text", SPEC, None, "max_analyzer_offset")["max_analyzer_offset"]
    assert clause["highlight_query"] == {"match": {"text": {"query": "bone fractures"}}}
    assert clause["fields"]["text"] == {
        "type": "unified",
        "boundary_scanner": "sentence",
        "fragment_size": 57,
        "number_of_fragments": 2 * CANDIDATES_PER_PASSAGE,
        "no_match_size": 57,
        "order": "score",
    }
    assert "highlight_query" not in highlight_clause("text", SPEC, None)


@pytest.mark.parametrize("engine", ["elasticsearch", "opensearch"])
def test_hybrid_legs_read_ids_and_the_re_read_highlights_under_the_scope(engine: str) -> None:
    t = _translator(engine, **PASSAGES)
    dialect = dialect_for(engine)

    def knn(request: SearchRequest, size: int, depth: int) -> dict[str, Any]:
        return knn_body(dialect, t, "embedding", request, size, depth)

    planner = HybridPlanner(t, knn, clamp01, group_field=None)
    # Shallow legs would carry their documents; with passages they never do.
    plan = planner.plan(_request(text="bone fractures", dense=[0.1], candidates=10), 10)
    assert plan.reread
    for leg in plan.legs:
        assert leg.body["_source"] is False
        assert "highlight" not in leg.body
    hits = [Hit("a", {}, index="i"), Hit("b", {}, index="i")]
    body = reread_body(t, hits, _request().filter, with_vectors=False, passage_text="bone")
    assert SCOPE in body["query"]["bool"]["filter"]
    assert body["highlight"]["highlight_query"] == {"match": {"text": {"query": "bone"}}}
    assert "text" in body["_source"]["includes"]  # the page's content: the offsets' ground
    # Without passages the same plan reads the documents in the legs, unhighlighted.
    plain = HybridPlanner(_translator(engine), knn, clamp01, group_field=None)
    assert not plain.plan(_request(text="x", dense=[0.1], candidates=10), 10).reread


@pytest.mark.parametrize("engine", ["elasticsearch", "opensearch"])
def test_a_knn_search_highlights_its_hits_with_the_query_text(engine: str) -> None:
    t = _translator(engine, **PASSAGES)
    body = knn_body(dialect_for(engine), t, "embedding", _request(dense=[0.1]), 10, 10)
    assert body["highlight"]["highlight_query"] == {"match": {"text": {"query": "bone fractures"}}}
    no_text = knn_body(
        dialect_for(engine), t, "embedding", SearchRequest(limit=5, dense=[0.1]), 5, 5
    )
    assert "highlight" not in no_text


def test_the_bound_stays_below_the_lowest_of_the_indices_own() -> None:
    key = "index.highlight.max_analyzed_offset"
    answer = {
        "set": {"settings": {key: "5000"}, "defaults": {}},
        "default": {"settings": {}, "defaults": {key: "1000000"}},
        "raised": {"settings": {key: "4000000"}},
    }
    assert analysed_bound(answer) == 4999
    assert analysed_bound({"raised": {"settings": {key: "4000000"}}}) == 3_999_999
    assert analysed_bound(answer) != ANALYSED_CHARS
    # Nothing readable: the engines' default bound.
    assert analysed_bound({}) == ANALYSED_CHARS
    assert analysed_bound({"x": {"settings": {key: "lots"}}, "y": []}) == ANALYSED_CHARS


def test_the_highlight_query_uses_the_text_fields_when_given() -> None:
    clause = highlight_clause("body", SPEC, "bone loss", query_fields=("title", "tags*"))
    query = {"multi_match": {"query": "bone loss", "fields": ["title", "tags*"]}}
    assert clause["highlight_query"] == query
    assert list(clause["fields"]) == ["body"]  # still the content's passages


def test_not_indexed_reads_every_index_of_the_mapping() -> None:
    def index(body: dict[str, Any]) -> dict[str, Any]:
        return {"mappings": {"properties": {"title": {"type": "text"}, "body": body}}}

    indexed = index({"type": "text"})
    stored = index({"type": "text", "index": False})
    nested = {"mappings": {"properties": {"doc": {"properties": {"body": {"index": "false"}}}}}}
    assert not not_indexed({"a": indexed}, "body")
    assert not_indexed({"a": indexed, "b": stored}, "body")  # an alias over both
    assert not_indexed({"n": nested}, "doc.body")
    assert not not_indexed({"a": indexed}, "missing")


def test_hits_carry_the_fragments_located_in_their_content() -> None:
    t = _translator(**PASSAGES)
    text = "Intro line here. " * 3 + "\n\nBone fractures rise with low vitamin D. " + "x " * 40
    response = {
        "hits": {
            "hits": [
                {
                    "_id": "1",
                    "_source": {"text": text},
                    "highlight": {"text": ["Bone fractures rise with low vitamin D."]},
                },
                {"_id": "2", "_source": {"text": "short"}, "highlight": {"text": ["short"]}},
            ]
        }
    }
    long_hit, short_hit = t.hits(response, with_vectors=False)
    assert long_hit.passages is not None
    ((start, end),) = long_hit.passages.spans
    assert start == text.index("Bone")
    assert long_hit.passages.texts == (text[start:end],)
    assert end - start <= 57
    assert long_hit.passages.length == len(text)
    assert long_hit.highlight is None  # the passages are the content, not a highlight
    assert short_hit.passages is None  # within the cap: the content is its own passage


def test_the_passage_the_highlighter_ranked_first_is_best_whatever_its_place() -> None:
    t = _translator(**PASSAGES)
    paragraphs = [f"Section {i} says little about anything at all here." for i in range(4)]
    text = "\n\n".join(paragraphs) + "\n\n" + "x " * 40
    # Best first, as the highlighter orders them (``order: score``): the third section's.
    fragments = [paragraphs[2], paragraphs[0]]
    response = {
        "hits": {
            "hits": [{"_id": "1", "_source": {"text": text}, "highlight": {"text": fragments}}]
        }
    }
    (hit,) = t.hits(response, with_vectors=False)
    assert hit.passages is not None
    starts = [s for s, _ in hit.passages.spans]
    assert starts == [0, text.index("Section 2")]  # in text order
    assert hit.passages.best == 1


def test_locate_finds_each_fragment_and_refuses_one_not_in_the_text() -> None:
    text = "Alpha one. Beta two is here.\n\nGamma three!"
    assert locate(text, ["Gamma three!", " Beta two is here. "], 100) == [(30, 42), (11, 28)]
    assert locate(text, ["Beta two", "not there"], 100) is None
    assert locate(text, ["  "], 100) is None


def test_cut_keeps_a_span_within_the_cap_at_a_word_end() -> None:
    text = "one two three four five"
    assert cut(text, 0, len(text), 100) == len(text)
    assert text[: cut(text, 0, len(text), 12)] == "one two"
    assert cut("abcdefghij", 0, 10, 4) == 4  # no word end: the cap


def test_choose_prefers_other_paragraphs_then_fills_and_keeps_text_order() -> None:
    text = "a" * 20 + "\n\n" + "b" * 20 + "\n\n" + "c" * 20
    ranked = [(0, 5), (6, 10), (22, 27), (3, 8)]  # (3, 8) overlaps the best
    assert choose(text, ranked, 2) == [(0, 5), (22, 27)]
    assert choose(text, ranked, 3) == [(0, 5), (6, 10), (22, 27)]


def _choose_by_blank_line_count(
    text: str, ranked: list[tuple[int, int]], count: int
) -> list[tuple[int, int]]:
    # choose's contract with a paragraph numbered by the blank lines before its start.
    breaks = paragraph_breaks(text)
    chosen: list[tuple[int, int]] = []
    used: set[int] = set()
    for diverse in (True, False):
        for start, end in ranked:
            paragraph = bisect_right(breaks, start)
            if len(chosen) == count or (diverse and paragraph in used):
                continue
            if not any(start < e and s < end for s, e in chosen):
                chosen.append((start, end))
                used.add(paragraph)
    return sorted(chosen)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="ab \n.", min_size=1, max_size=60),
    st.lists(st.tuples(st.integers(0, 59), st.integers(1, 8)), min_size=1, max_size=6),
    st.integers(1, 4),
)
def test_choose_tells_paragraphs_apart_as_the_blank_lines_between_them_do(
    text: str, picks: list[tuple[int, int]], count: int
) -> None:
    # Spans start on a visible character, as located fragments and anchors do; runs
    # of three or more line breaks included.
    starts = [i for i, c in enumerate(text) if not c.isspace()]
    assume(starts)
    ranked = [(starts[i % len(starts)], starts[i % len(starts)] + n) for i, n in picks]
    assert choose(text, ranked, count) == _choose_by_blank_line_count(text, ranked, count)


def test_widen_runs_on_to_a_sentence_end_and_never_into_the_next_span() -> None:
    text = "Short one. And more words follow here. Next. Tail words go on and on."
    first = text.index("Next")
    spans = widen(text, [(0, 10), (first, first + 5)], 40)
    assert text[spans[0][0] : spans[0][1]] == "Short one. And more words follow here."
    assert spans[0][1] <= first
    assert widen(text, [(0, 10), (12, 20)], 40)[0] == (0, 10)  # the next span starts at once


def test_passages_of_a_content_that_is_not_one_string_are_the_gateways() -> None:
    src = {"text": ["a list", "of values"]}
    assert passages_of(src, "text", ["a list"], SPEC) is None
    assert passages_of({"text": "x" * 200}, "text", [], SPEC) is None


def test_widen_stops_at_each_sentence_mark_and_starts_after_one() -> None:
    text = "Why now? Because! A line\nNext words go on here. End."
    # Forward: the last mark within the cap that keeps half of it, "?", "!" or a line break.
    assert text[slice(*widen(text, [(0, 3)], 12)[0])] == "Why now?"
    assert text[slice(*widen(text, [(0, 3)], 20)[0])] == "Why now? Because!"
    assert text[slice(*widen(text, [(0, 3)], 26)[0])] == "Why now? Because! A line"
    # Backward, with room left at the text's end: the earliest sentence start in reach.
    tail = text.index("End")
    assert widen(text, [(tail, len(text))], 30)[0][0] == text.index("Next")
    assert widen(text, [(tail, len(text))], 40)[0][0] == text.index("A line")
    assert widen(text, [(tail, len(text))], 45)[0][0] == text.index("Because")
