"""Passage selection in the gateway: the window of a long text that best answers a query.

The text is cut into units (sentences, or blank-line paragraphs) with their
character offsets; every run of consecutive units that fits the character cap is
a window, scored by the query terms it holds (each distinct term once, weighted by
how rare it is among the text's units, so a window that covers more of the
question wins over one that repeats a common word). The best windows, at most
``count`` and not overlapping, are the passages, in text order. A text within
the cap is its own passage and costs no scoring.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from gateway.a2m.records import Record
from gateway.stages.config import PassagesConfig

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|\n\s*\n|\n(?=\S)")
_PARAGRAPH_END = re.compile(r"\n\s*\n")
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
    }
)
SEPARATOR = " … "
"""Between two passages of one record's content."""
FRAGMENT_SCHEMES = frozenset({"http", "https"})
"""Schemes whose documents a browser opens at a text fragment (``#:~:text=``)."""


@dataclass(frozen=True, slots=True)
class Span:
    """``text[start:end]``: a unit or a chosen passage."""

    start: int
    end: int


def units(text: str, unit: str = "sentence") -> list[Span]:
    """The text's sentences (or paragraphs) as spans, stripped of surrounding whitespace."""
    splitter = _PARAGRAPH_END if unit == "paragraph" else _SENTENCE_END
    spans: list[Span] = []
    start = 0
    for m in splitter.finditer(text):
        _add(text, start, m.start(), spans)
        start = m.end()
    _add(text, start, len(text), spans)
    return spans


def _add(text: str, start: int, end: int, spans: list[Span]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        spans.append(Span(start, end))


def terms(text: str) -> set[str]:
    """The words of ``text`` that carry meaning, folded (case, a plural's or a verb's ending)."""
    return {_fold(w) for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}


def _fold(word: str) -> str:
    # A five-letter prefix: cheap, and "mutations"/"mutated"/"mutation" meet.
    return word[:5] if len(word) > 5 else word


def select(text: str, query: str, config: PassagesConfig) -> list[Span]:
    """The passages of ``text`` for ``query``: at most ``config.count``, within ``max_chars``.

    A text within the cap is one passage, the whole text. Without a query term in
    the text, the text's head is the passage.
    """
    cap = config.max_chars
    if len(text) <= cap:
        return [Span(0, len(text))] if text else []
    spans = units(text, config.unit)
    wanted = terms(query)
    bags = [terms(text[s.start : s.end]) & wanted for s in spans]
    weights = _weights(bags, wanted)
    per = max(cap // config.count - len(SEPARATOR), 1)
    chosen: list[Span] = []
    taken: set[int] = set()
    for _ in range(config.count):
        best = _best_window(spans, bags, weights, per, taken)
        if best is None:
            break
        first, last, score = best
        if chosen and score <= 0:
            break
        taken.update(range(first, last + 1))
        chosen.append(_clip(text, Span(spans[first].start, spans[last].end), per))
    return sorted(chosen, key=lambda s: s.start)


def _weights(bags: list[set[str]], wanted: set[str]) -> dict[str, float]:
    n = len(bags)
    df = {t: sum(1 for b in bags if t in b) for t in wanted}
    return {t: math.log(1 + n / d) for t, d in df.items() if d}


def _best_window(
    spans: list[Span],
    bags: list[set[str]],
    weights: dict[str, float],
    cap: int,
    taken: set[int],
) -> tuple[int, int, float] | None:
    """(first unit, last unit, score) of the best free window within ``cap``; ties: earliest."""
    best: tuple[int, int, float] | None = None
    for first in range(len(spans)):
        if first in taken:
            continue
        covered: set[str] = set()
        last = first
        for i in range(first, len(spans)):
            if i in taken or (i > first and spans[i].end - spans[first].start > cap):
                break
            covered |= bags[i]
            last = i
        score = sum(weights[t] for t in covered)
        if best is None or score > best[2]:
            best = (first, last, score)
    return best


def _clip(text: str, span: Span, cap: int) -> Span:
    """The span, cut at the last word boundary within ``cap`` characters when longer."""
    if span.end - span.start <= cap:
        return span
    end = span.start + cap
    space = text.rfind(" ", span.start, end)
    return Span(span.start, space if space > span.start else end)


def text_fragment_uri(uri: str | None, passage: str) -> str | None:
    """``uri`` with a text fragment (``#:~:text=start,end``) at ``passage``; None when the
    scheme is not one a browser scrolls to a text fragment."""
    if not uri or urlsplit(uri).scheme.lower() not in FRAGMENT_SCHEMES:
        return None
    words = passage.split()
    if not words:
        return None
    head = " ".join(words[:4])
    directive = _encode(head)
    if len(words) > 8:
        directive += "," + _encode(" ".join(words[-4:]))
    base = uri if "#" in uri else uri + "#"
    return f"{base}:~:text={directive}"


def _encode(text: str) -> str:
    # The directive's own syntax characters (',', '&', '-') must be escaped in a term.
    return quote(text, safe="").replace("-", "%2D")


class PassageStage:
    """``search.passages``: each recalled record's content becomes its passage(s).

    ``metadata.passage`` says where they sit in the whole content that
    ``memory/fetch`` returns: ``offsets`` ([start, end) character pairs), ``length``
    (the whole content's characters) and, where the record's ``uri`` scheme allows,
    ``uri`` (the record's ``uri`` with a text fragment at the first passage).
    """

    name = "passages"

    def __init__(self, config: PassagesConfig) -> None:
        self.config = config

    def describe(self) -> dict[str, object]:
        c = self.config
        return {"stage": self.name, "max_chars": c.max_chars, "count": c.count, "unit": c.unit}

    def apply(self, records: list[Record], query: str) -> list[Record]:
        """The records with their content cut to passages (in place; the same list)."""
        for record in records:
            text = record.content
            if not text or len(text) <= self.config.max_chars:
                continue
            spans = select(text, query, self.config)
            if not spans:
                continue
            record.content = SEPARATOR.join(text[s.start : s.end] for s in spans)
            where: dict[str, object] = {
                "offsets": [[s.start, s.end] for s in spans],
                "length": len(text),
            }
            anchored = text_fragment_uri(record.uri, text[spans[0].start : spans[0].end])
            if anchored is not None:
                where["uri"] = anchored
            record.metadata = {**(record.metadata or {}), "passage": where}
        return records
