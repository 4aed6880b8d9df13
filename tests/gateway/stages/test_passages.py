"""Passage selection: units and their offsets, window scoring, the cap, the text fragment."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from gateway.a2m.records import Record
from gateway.config.engines import LuceneSearchConfig
from gateway.stages.config import PassagesConfig
from gateway.stages.passages import SEPARATOR, PassageStage, select, text_fragment_uri
from gateway.stages.rank import scanned
from gateway.stages.scan import SCAN_CHARS
from gateway.stages.windows import unit_end, unit_start

FILLER = "Nothing in this sentence is about the question at all, it only pads the page. "


def long_text(answer: str, before: int = 12, after: int = 12) -> tuple[str, int]:
    """Filler, the answer sentence, filler; and where the answer starts."""
    head = FILLER * before
    return head + answer + " " + FILLER * after, len(head)


def test_windows_start_at_a_sentence_and_end_at_one_within_the_cap() -> None:
    text = "First one.  Second one?\n\nThird para! A heading\nlast words here"
    at = text.index("Third")
    assert unit_start(text, text.index("para"), paragraphs=False) == at
    assert unit_start(text, text.index("heading"), paragraphs=False) == text.index("A heading")
    assert unit_start(text, text.index("heading"), paragraphs=True) == at
    assert unit_start(text, text.index("one?"), paragraphs=False) == text.index("Second")
    # Within 30 characters from "Third", the last sentence end keeping half of them.
    assert text[at : unit_end(text, at, 30, paragraphs=False)] == "Third para! A heading"
    assert unit_end(text, at, 1000, paragraphs=False) == len(text)


def test_prose_wrapped_at_a_fixed_width_is_cut_at_sentences_not_at_its_line_breaks() -> None:
    prose = (
        "Filler about nothing in particular fills this first sentence of the paragraph. The\n"
        "gateway scores every window by the words it covers, each weighted by how rare it\n"
        "is in the document. Another sentence follows that has nothing to do with it at all.\n"
    )
    text = (FILLER * 6 + "\n\n") + prose + ("\n" + FILLER * 6)
    [span] = select(
        text, "how are windows weighted by rare words?", PassagesConfig(max_chars=200, count=1)
    )
    passage = text[span.start : span.end]
    assert passage.startswith("The\ngateway scores every window")
    assert passage.rstrip().endswith(".")  # a sentence's end, not a line's
    # A short line (a heading) and a line that opens with a capital still end a unit.
    assert unit_start("A heading\nwords go on here", 14, paragraphs=False) == 10
    wrapped = "x" * 70 + "\nlowercase goes on"
    assert unit_start(wrapped, len(wrapped) - 3, paragraphs=False) == 0


def test_the_window_holding_the_query_terms_wins_and_offsets_point_at_it() -> None:
    answer = "Vitamin D deficiency raises the risk of fractures in elderly women."
    text, at = long_text(answer)
    cfg = PassagesConfig(max_chars=200, count=1)
    [span] = select(text, "does vitamin D deficiency cause fractures?", cfg)
    assert span.start <= at
    assert span.end >= at + len(answer)
    assert span.end - span.start <= 200


def test_every_passage_is_within_the_cap_even_for_one_huge_sentence() -> None:
    text = "word " * 1000 + "target"
    for count in (1, 2, 3):
        cfg = PassagesConfig(max_chars=300, count=count)
        spans = select(text, "word target", cfg)
        total = sum(s.end - s.start for s in spans) + len(SEPARATOR) * (len(spans) - 1)
        assert spans
        assert total <= 300


def test_two_passages_are_disjoint_and_in_text_order() -> None:
    first = "Insulin resistance precedes type 2 diabetes by years."
    second = "Metformin lowers hepatic glucose output."
    text = FILLER * 10 + first + " " + FILLER * 10 + second + " " + FILLER * 10
    spans = select(text, "insulin resistance metformin glucose", PassagesConfig(count=2))
    assert len(spans) == 2
    assert spans[0].end <= spans[1].start
    chosen = [text[s.start : s.end] for s in spans]
    assert any(first in c for c in chosen)
    assert any(second in c for c in chosen)


def test_a_text_within_the_cap_is_its_own_passage() -> None:
    assert select("short text.", "anything", PassagesConfig()) == select(
        "short text.", "other", PassagesConfig()
    )
    [span] = select("short text.", "q", PassagesConfig())
    assert (span.start, span.end) == (0, 11)


def test_no_query_term_in_the_text_gives_its_head() -> None:
    text = FILLER * 20
    [span] = select(text, "zebra", PassagesConfig(max_chars=200))
    assert span.start == 0


def test_text_fragment_only_for_schemes_a_browser_scrolls() -> None:
    passage = "the risk-of fractures, in elderly women & men rises with age"
    uri = text_fragment_uri("https://example.org/doc", passage)
    assert uri is not None
    assert uri.startswith("https://example.org/doc#:~:text=")
    directive = uri.split("#:~:text=", 1)[1]
    start, end = directive.split(",")
    assert unquote(start) == "the risk-of fractures, in"
    assert unquote(end) == "men rises with age"
    assert "-" not in directive
    assert "&" not in directive
    assert text_fragment_uri("s3://bucket/key", passage) is None
    assert text_fragment_uri(None, passage) is None
    anchored = text_fragment_uri("https://x.org/p#sec", "a b")
    assert anchored == "https://x.org/p#sec:~:text=a%20b"


def test_the_stage_cuts_content_and_says_where_the_passage_sits() -> None:
    answer = "Vitamin D deficiency raises the risk of fractures in elderly women."
    text, _ = long_text(answer)
    record = Record(id="1", content=text, uri="https://example.org/a", metadata={"x": 1})
    short = Record(id="2", content="short and whole.")
    PassageStage(PassagesConfig(max_chars=300, count=1)).apply(
        [record, short], "vitamin D fractures"
    )
    assert record.content is not None
    assert answer in record.content
    assert len(record.content) <= 300
    assert record.metadata is not None
    assert record.metadata["x"] == 1
    where = record.metadata["passage"]
    [[start, end]] = where["offsets"]
    assert text[start:end] == record.content
    assert where["length"] == len(text)
    assert where["uri"].startswith("https://example.org/a#:~:text=")
    assert short.content == "short and whole."
    assert short.metadata is None


def test_offsets_count_code_points_past_characters_outside_the_bmp() -> None:
    # Emoji (two UTF-16 units each) and accents before the passage: the offsets slice the
    # content as its code points, and the length is theirs.
    answer = "Vitamin D deficiency raises the risk of fractures in elderly women."
    head = "Étude 😀 café 🦴 naïve résumé. " * 40
    text = head + "\n\n" + answer + " " + "Other words follow here. " * 20
    record = Record(id="1", content=text)
    PassageStage(PassagesConfig(max_chars=200, count=1)).apply([record], "vitamin D fractures")
    assert record.metadata is not None
    where = record.metadata["passage"]
    [[start, end]] = where["offsets"]
    assert start >= len(head)  # past the emoji
    assert text[start:end] == record.content
    assert answer in record.content
    assert where["length"] == len(text) < len(text.encode("utf-16-le")) // 2


def test_only_the_head_of_a_huge_content_is_read() -> None:
    # Past SCAN_CHARS the text is not read: an answer there is not found (the head is
    # given, as for a text without the query's terms), one inside the bound is.
    answer = "Vitamin D deficiency raises the risk of fractures."
    filler = "Other words follow here without the asked terms. "
    body = filler * (SCAN_CHARS // len(filler) + 1000)
    assert len(body) > SCAN_CHARS
    past = body + "\n\n" + answer
    [span] = select(past, "vitamin deficiency fractures", PassagesConfig(count=1))
    assert span.start == 0
    assert answer not in past[span.start : span.end]
    middle = len(body) // 2
    inside = body[:middle] + "\n\n" + answer + "\n\n" + body[middle:]
    [span] = select(inside, "vitamin deficiency fractures", PassagesConfig(count=1))
    assert answer in inside[span.start : span.end]
    # The rank reads a paragraph's first SCAN_CHARS characters too.
    [(counts, chars)] = scanned(past + " vitamin", [], ["vitam"])
    assert chars == SCAN_CHARS
    assert counts == {}


def test_passages_the_engine_chose_are_shortened_to_a_folds_share_with_their_offsets() -> None:
    doc = "Alpha beta gamma delta epsilon zeta. " * 20 + "Eta theta iota kappa lambda mu. " * 20
    first = doc[:296]
    second_at = doc.index("Eta")
    second = doc[second_at : second_at + 280]
    cut = Record(
        id="1",
        content=first + SEPARATOR + second,
        group="g",
        metadata={
            "passage": {"offsets": [[0, 296], [second_at, second_at + 280]], "length": len(doc)}
        },
    )
    folded = Record(id="2", content="another chunk " * 40, group="g")
    folds = [[folded]]
    PassageStage(PassagesConfig(max_chars=600, count=4), by_engine=True).apply(
        [cut], "alpha eta", folds
    )
    assert cut.content is not None
    assert cut.metadata is not None
    assert len(cut.content) <= 300 - 1  # its share: half the cap, less the fold separator
    where = cut.metadata["passage"]
    assert where["length"] == len(doc)
    assert "best" not in where  # the mapper gave none: not made up
    for (start, end), text in zip(where["offsets"], cut.content.split(SEPARATOR), strict=True):
        assert doc[start:end] == text


def test_the_best_passage_is_named_in_text_order_and_kept_only_while_it_is_kept() -> None:
    # The gateway's selection: the window holding most of the query, wherever it sits.
    lead = "Fractures were rare. " + "Filler words about nothing at all. " * 12
    text = lead + "\n\n" + "Vitamin D deficiency raises the risk of bone fractures. " * 2
    text += "\n\n" + "Filler words about nothing at all. " * 12
    record = Record(id="1", content=text)
    PassageStage(PassagesConfig(max_chars=300, count=2, rank=False)).apply(
        [record], "vitamin D bone fractures"
    )
    assert record.metadata is not None
    where = record.metadata["passage"]
    assert len(where["offsets"]) == 2
    best = where["offsets"][where["best"]]
    assert where["best"] == 1
    assert text[best[0] : best[1]].startswith("Vitamin D deficiency")
    # The engine's: a best passage the cap cuts away is no longer named.
    doc = "Alpha beta gamma delta epsilon zeta. " * 20 + "Eta theta iota kappa lambda mu. " * 20
    at = doc.index("Eta")
    offsets = [[0, 296], [at, at + 280]]
    # 299: room for the first only; 310: the second cut to a stub of a few words.
    for best_in, cap, best_out in ((0, 299, 0), (1, 299, None), (1, 310, None), (0, 310, 0)):
        cut = Record(
            id="1",
            content=doc[:296] + SEPARATOR + doc[at : at + 280],
            metadata={"passage": {"offsets": offsets, "length": len(doc), "best": best_in}},
        )
        PassageStage(PassagesConfig(max_chars=cap, count=4), by_engine=True).apply([cut], "alpha")
        assert cut.metadata is not None
        assert cut.metadata["passage"].get("best") == best_out


def test_passages_config_in_search() -> None:
    search = LuceneSearchConfig.model_validate(
        {"text_fields": ["t"], "passages": {"max_chars": 400}, "per_group": 2}
    )
    assert search.passages is not None
    assert search.passages.max_chars == 400
    assert search.per_group == 2
    assert LuceneSearchConfig(text_fields=["t"]).passages is None
    with pytest.raises(ValueError, match="max_chars"):
        PassagesConfig(max_chars=10)
