"""The scan view: lowered, one character per byte, positions mapped back to characters."""

from __future__ import annotations

import pytest

from gateway.stages.config import PassagesConfig
from gateway.stages.passages import SEPARATOR, select
from gateway.stages.scan import Scan

FILLER = "Ünrelated β-cell filler about nothing — it only pads the page (≈ 80 chars). "


def test_an_ascii_text_is_viewed_lowered_at_the_same_positions() -> None:
    scan = Scan("Insulin RESISTANCE")
    assert scan.view == "insulin resistance"
    assert scan.terms(["insul"]) == ["insul"]
    assert scan.char(8) == 8


def test_a_non_ascii_view_position_maps_to_the_texts_character() -> None:
    text = "Größe β-Zellen and Insulin"
    scan = Scan(text)
    at = scan.view.find("insulin")
    assert at > text.index("Insulin")  # bytes: the view is longer before it
    assert scan.char(at) == text.index("Insulin")
    inside = scan.view.find("ß".encode().decode("latin-1")) + 1  # the second byte of "ß"
    assert scan.char(inside) == text.index("ß")
    assert scan.terms(["größe"]) == ["größe".encode().decode("latin-1")]


def test_a_views_span_is_measured_in_the_texts_characters() -> None:
    text = "Größe β-Zellen\n\nInsulin"
    scan = Scan(text)
    blank = scan.view.find("\n\n")
    assert scan.length(0, blank) == text.index("\n\n")
    assert scan.length(blank + 2, len(scan.view)) == len("Insulin")
    assert Scan("Plain text").length(2, 7) == 5


def test_passages_of_a_non_ascii_text_are_character_offsets_within_the_cap() -> None:
    answer = "Metformin lowers hepatic glucose output in β-cell\u2013deficient mice."
    text = FILLER * 15 + answer + " " + FILLER * 15
    cfg = PassagesConfig(max_chars=300, count=2)
    spans = select(text, "does metformin lower glucose output?", cfg)
    assert any(text[s.start : s.end].find("Metformin lowers") >= 0 for s in spans)
    assert sum(s.end - s.start for s in spans) + len(SEPARATOR) * (len(spans) - 1) <= 300
    for s in spans:
        assert not text[s.start].isspace()


def test_many_positions_map_at_once_as_one_by_one() -> None:
    text = "Größe β-Zellen — and Insulin, résumé of naïve cells"
    scan = Scan(text)
    positions = list(range(len(scan.view) + 1))
    assert scan.chars(positions) == [scan.char(p) for p in positions]
    assert Scan("plain").chars([0, 3, 5]) == [0, 3, 5]
    with pytest.raises(ValueError, match="must not decrease"):
        scan.chars([10, 4])
