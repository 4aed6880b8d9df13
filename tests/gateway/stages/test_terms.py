"""The query's terms found in one pass: the same hits as a scan per term, on any text."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.stages.passages import query_terms
from gateway.stages.scan import Scan
from gateway.stages.terms import find
from gateway.stages.windows import find_terms

# Letters that fold or share a prefix, digits, an underscore (a word character that is not
# a letter), non-ASCII letters of two and three bytes (whose continuation bytes the view
# reads as Latin-1 signs), and the marks that end a word.
ALPHABET = "celluarsindxyz019_ éßβİ—-.,\n"
WORDS = ["cell", "cells", "cellular", "cellu", "ar", "x_y", "café", "éclat", "βcell", "ß", "12"]


def reference(text: str, wanted: list[str]) -> tuple[list[int], list[str]]:
    scan = Scan(text)
    return find_terms(scan.view, scan.terms(wanted))


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(st.one_of(st.sampled_from(WORDS), st.text(ALPHABET, max_size=6)), max_size=40),
    query=st.lists(st.one_of(st.sampled_from(WORDS), st.text(ALPHABET, max_size=8)), max_size=6),
)
def test_one_pass_finds_what_a_scan_per_term_finds(text: list[str], query: list[str]) -> None:
    joined = " ".join(text)
    wanted = query_terms(" ".join(query))
    assert find(Scan(joined), wanted) == reference(joined, wanted)


def test_a_term_is_found_at_word_starts_only_and_a_short_one_as_a_whole_word() -> None:
    text = "Cellular cells, a cell; subcellular x_y cafe_cell CELL"
    wanted = query_terms("cellular cell x_y")  # "cellu", "cell", "x_y"
    positions, terms = find(Scan(text), wanted)
    found = [(text[p : p + len(t)], p) for p, t in zip(positions, terms, strict=True)]
    # Not in "cells" (a longer word than "cell") nor "subcellular" (not at a word start);
    # after an underscore is a word start.
    assert found == [
        ("Cellu", 0),
        ("cell", text.index("cell;")),
        ("x_y", text.index("x_y")),
        ("cell", text.index("cell CELL")),
        ("CELL", text.index("CELL")),
    ]
    assert (positions, terms) == reference(text, wanted)


def test_a_non_ascii_text_is_searched_in_its_view_positions() -> None:
    text = "Größe der β-Zellen: Insulin und insulinähnliche Faktoren"
    wanted = query_terms("insulin größe")
    scan = Scan(text)
    positions, terms = find(scan, wanted)
    assert terms == ["größe".encode().decode("latin-1"), "insul", "insul"]
    assert [scan.char(p) for p in positions] == [0, text.index("Insulin"), text.index("insulin")]


def test_threads_share_one_querys_automaton() -> None:
    text = "The cell divides. " * 200 + "Telomerase activity declines."
    wanted = query_terms("telomerase activity cell")
    expected = reference(text, wanted)
    answers: list[tuple[list[int], list[str]]] = []

    def run() -> None:
        for _ in range(50):
            answers.append(find(Scan(text), wanted))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 200
    assert all(a == expected for a in answers)
