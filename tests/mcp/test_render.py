"""The character budget and the shapes of tool results (engine-independent: plain records in)."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from gateway.mcp import render
from gateway.mcp.schemas import OUTPUT_SCHEMAS


def record(i: int, content: str, **extra: object) -> dict[str, object]:
    return {"id": str(i), "content": content, "score": 1 / (i + 1), **extra}


@pytest.mark.parametrize("fmt", ["compact", "json"])
def test_a_listing_over_budget_drops_the_lowest_ranked_first(fmt: str) -> None:
    budget = render.Budget(max_chars=2_000, snippet_chars=300, text_format=fmt)  # type: ignore[arg-type]
    records = [record(i, f"Title {i}\n" + "word " * 200, uri=f"https://x/{i}") for i in range(30)]
    out = render.listing(records, "docs", True, budget)
    kept = [r["id"] for r in out["results"]]
    assert kept == [f"docs:{i}" for i in range(len(kept))]
    assert 0 < len(kept) < 30
    assert out["omitted"] == 30 - len(kept)
    assert out["truncated"] is True
    text = render.text_of(out, budget)
    assert len(text) <= 2_000
    assert len(orjson.dumps(out)) <= 2_000
    if fmt == "compact":
        assert f"({out['omitted']} more results omitted" in text
    assert list(Draft202012Validator(OUTPUT_SCHEMAS["search"]).iter_errors(out)) == []


def test_within_budget_nothing_is_dropped_and_markers_follow_rank() -> None:
    budget = render.Budget(max_chars=20_000, snippet_chars=50, text_format="compact")
    records = [record(i, f"# Heading {i}\nbody " * 3, metadata={"lang": "en"}) for i in range(3)]
    out = render.listing(records, "docs", False, budget)
    assert [r["cite"] for r in out["results"]] == ["[1]", "[2]", "[3]"]
    assert [r["id"] for r in out["results"]] == ["0", "1", "2"]
    assert out["results"][0]["title"] == "Heading 0"
    assert all(len(r["snippet"]) <= 50 for r in out["results"])
    assert (out["truncated"], out["omitted"]) == (False, 0)


def test_one_document_too_long_is_cut_and_marked() -> None:
    budget = render.Budget(max_chars=1_000, snippet_chars=300, text_format="compact")
    # Quotes and newlines are escaped in JSON, so the JSON form is the larger one here.
    doc = render.document(record(7, '"quoted"\n' * 400, metadata={"title": "T"}), "d", True, budget)
    assert doc["truncated"] is True
    assert doc["text"].endswith(render.ELLIPSIS)
    assert len(orjson.dumps(doc)) <= 1_000
    assert len(render.text_of(doc, budget)) <= 1_000
    assert (doc["id"], doc["title"]) == ("d:7", "T")
    assert list(Draft202012Validator(OUTPUT_SCHEMAS["fetch"]).iter_errors(doc)) == []


def test_a_short_document_is_whole() -> None:
    budget = render.Budget(max_chars=1_000, snippet_chars=300, text_format="json")
    doc = render.document(record(1, "all of it", key="k/1", group="g"), "d", False, budget)
    assert (doc["text"], doc["truncated"], doc["key"]) == ("all of it", False, "k/1")
    assert doc["metadata"] == {"group": "g"}
    assert orjson.loads(render.text_of(doc, budget)) == doc


def test_a_snippet_of_a_long_document_is_marked_cut_even_inside_whitespace() -> None:
    budget = render.Budget(max_chars=20_000, snippet_chars=40, text_format="compact")
    spaced = "start" + " " * 500 + "end of a long document"
    (r,) = render.listing([record(1, spaced)], "d", False, budget)["results"]
    assert r["snippet"].startswith("start")
    assert r["snippet"].endswith(render.ELLIPSIS)
    assert len(r["snippet"]) <= 40
    (short,) = render.listing([record(2, "a  b\n c")], "d", False, budget)["results"]
    assert short["snippet"] == "a b c"


def test_every_kind_of_whitespace_collapses_to_one_space_in_titles_and_snippets() -> None:
    budget = render.Budget(max_chars=20_000, snippet_chars=300, text_format="compact")
    # Every code point Python's `\s` matches: tab, newline, NEL, no-break space, U+2028, ...
    spaces = [chr(c) for c in range(0x3001) if re.fullmatch(r"\s", chr(c))]
    assert len(spaces) > 20
    text = "".join(f"w{i}{s}{s}" for i, s in enumerate(spaces)).strip()
    expected = " ".join(f"w{i}" for i in range(len(spaces)))
    listing = render.listing(
        [record(1, f"  {text}  ", metadata={"title": f"\u00a0{text}\t"})], "d", False, budget
    )
    (r,) = listing["results"]
    assert len(expected) < render.TITLE_CHARS  # nothing is cut: only the spaces change
    assert (r["title"], r["snippet"]) == (expected, expected)


@settings(max_examples=500, deadline=None)
@example("a b")
@example(" a b ")
@example("a\u2009b")
@example("a\x1cb c")  # an ASCII control character str.split splits on
@example("a\x7fb c")  # and one it does not
@given(st.text(min_size=1, max_size=60))
def test_a_metadata_title_is_its_text_with_whitespace_collapsed(title: str) -> None:
    # Over any code points: the collapse's shortcut for single-spaced text changes nothing.
    collapsed = " ".join(title.split())
    got = render.title_of({"id": 1, "metadata": {"title": title}, "key": "k"})
    assert got == (collapsed if collapsed else "k")


@settings(max_examples=500, deadline=None)
@example("a  \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f b")
@example(" " * 1000 + "a" + " " * 3 + "b" + " " * 17)
@given(st.text(alphabet=st.characters(max_codepoint=127), min_size=1, max_size=200))
def test_an_ascii_title_is_its_text_with_whitespace_collapsed(title: str) -> None:
    # ASCII text takes the byte-level printability check: it must agree with split and join.
    collapsed = " ".join(title.split())
    got = render.title_of({"id": 1, "metadata": {"title": title}, "key": "k"})
    assert got == (_cut(collapsed) if collapsed else "k")


def _cut(text: str) -> str:
    n = render.TITLE_CHARS
    return text if len(text) <= n else text[: n - 1].rstrip() + render.ELLIPSIS


def test_a_title_is_the_first_non_blank_line_wherever_it_starts() -> None:
    head = render.TITLE_SCAN_CHARS
    cases = {
        "# first": "\n\n# first\nsecond",
        "x" * 119 + render.ELLIPSIS: " " * (head - 3) + "\n" + "x" * 300,
        "late title": "\n" * (head + 10) + "late title\nmore",
        "abcdefgh": "\n" * (head - 2) + "abcdefgh" + "\nrest",
    }
    for expected, content in cases.items():
        assert render.title_of({"id": 1, "content": content}) == expected.lstrip("# ")
    assert render.title_of({"id": 1, "content": "\n \n" * 3000, "key": "k"}) == "k"


@settings(max_examples=400, deadline=None)
@example("a" + " " * 64 + "b", 1)  # the short head's collapse is exactly n long
@example("w" * 7 + "\n" * 70 + "more", 7)
@given(
    st.lists(
        st.sampled_from(["a", "bc", "word ", " ", "  ", "\n", "\t", "\u2028", "\xa0"]),
        max_size=700,
    ).map("".join),
    st.sampled_from([1, 2, 7, 40, 300]),
)
def test_a_snippet_is_the_cut_of_the_collapsed_head(content: str, n: int) -> None:
    # The snippet reads a short head first; it must cut as reading 2n + 64 characters does.
    head = content[: 2 * n + 64]
    collapsed = " ".join(head.split())
    if len(collapsed) > n or len(head) < len(content):
        expected = collapsed[: n - 1].rstrip() + render.ELLIPSIS
    else:
        expected = collapsed
    budget = render.Budget(max_chars=10**6, snippet_chars=n, text_format="compact")
    (r,) = render.listing([record(1, content)], "d", False, budget)["results"]
    assert r["snippet"] == expected


def test_a_passage_shows_where_it_sits_in_the_document() -> None:
    budget = render.Budget(max_chars=20_000, snippet_chars=300, text_format="compact")
    where = {"offsets": [[120, 180]], "length": 9000, "uri": "https://x/a#:~:text=Refunds"}
    records = [
        record(
            0, "Refunds are paid within 30 days.", uri="https://x/a", metadata={"passage": where}
        ),
        record(1, "A whole short record."),
    ]
    out = render.listing(records, "docs", False, budget)
    assert out["results"][0]["passage"] == where
    assert "passage" not in out["results"][1]
    text = render.text_of(out, budget)
    assert "(passage at characters 120-180 of 9000) https://x/a#:~:text=Refunds" in text
    assert list(Draft202012Validator(OUTPUT_SCHEMAS["search"]).iter_errors(out)) == []


def test_folded_records_are_named_with_their_fetchable_ids_and_ranges() -> None:
    budget = render.Budget(max_chars=20_000, snippet_chars=300, text_format="compact")
    chunks = [{"id": "7", "key": "d/7", "range": [0, 10]}, {"id": "9", "range": [12, 20]}]
    records = [record(0, "first part\n\nsecond", metadata={"chunks": chunks})]
    out = render.listing(records, "docs", True, budget)
    got = out["results"][0]["chunks"]
    assert [c["range"] for c in got] == [[0, 10], [12, 20]]
    assert [c["id"] for c in got] == [
        render.public_id("docs", "7", True),
        render.public_id("docs", "9", True),
    ]
    assert got[0]["id"] != "7"  # qualified: the store is named, as fetch expects
    text = render.text_of(out, budget)
    assert f"id {got[0]['id']} at 0-10, id {got[1]['id']} at 12-20" in text
    assert list(Draft202012Validator(OUTPUT_SCHEMAS["search"]).iter_errors(out)) == []
