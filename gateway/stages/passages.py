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
from bisect import bisect_right
from collections import Counter
from typing import NamedTuple
from urllib.parse import quote, urlsplit

from gateway.a2m.records import Record
from gateway.stages.config import PassagesConfig

_SENTENCE_END = re.compile(r"([.!?])\s+|\n\s*")
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
FOLD = 5
"""Query and text words are compared on their first FOLD letters."""
SATURATION = 0.5
"""How fast a term's repeated mentions stop adding to a window's score."""
SEPARATOR = " … "
"""Between two passages of one record's content."""
FRAGMENT_SCHEMES = frozenset({"http", "https"})
"""Schemes whose documents a browser opens at a text fragment (``#:~:text=``)."""


class Span(NamedTuple):
    """``text[start:end]``: a unit or a chosen passage."""

    start: int
    end: int


def units(text: str, unit: str = "sentence") -> list[Span]:
    """The text's sentences (or paragraphs) as spans, stripped of surrounding whitespace."""
    splitter = _PARAGRAPH_END if unit == "paragraph" else _SENTENCE_END
    spans: list[Span] = []
    start = 0
    for m in splitter.finditer(text):
        # A sentence keeps its closing mark (group 1); a line break is not part of a unit.
        _add(text, start, m.end(1) if m.lastindex else m.start(), spans)
        start = m.end()
    _add(text, start, len(text), spans)
    return spans


def _add(text: str, start: int, end: int, spans: list[Span]) -> None:
    # The separators swallow the whitespace after a unit; only the text's own ends remain.
    if start < end and (text[start].isspace() or text[end - 1].isspace()):
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
    return word[:FOLD] if len(word) > FOLD else word


def query_terms(query: str) -> list[str]:
    """The query's folded terms, longest first (what passage selection looks for)."""
    return sorted(terms(query), key=lambda t: (-len(t), t))


def select(
    text: str, query: str, config: PassagesConfig, wanted: list[str] | None = None
) -> list[Span]:
    """The passages of ``text`` for ``query``: at most ``config.count``, within ``max_chars``.

    A text within the cap is one passage, the whole text. Without a query term in
    the text, the text's head is the passage. ``wanted``: ``query_terms(query)``,
    when the caller has them already.
    """
    cap = config.max_chars
    if len(text) <= cap:
        return [Span(0, len(text))] if text else []
    spans = units(text, config.unit)
    found = _found(text, spans, query_terms(query) if wanted is None else wanted)
    weights = _weights(found)
    per = max(cap // config.count - len(SEPARATOR), 1)
    chosen: list[Span] = []
    taken: set[int] = set()
    for _ in range(config.count):
        best = _best_window(spans, found, weights, per, taken)
        if best is None:
            break
        first, last, score = best
        if chosen and score <= 0:
            break
        taken.update(range(first, last + 1))
        chosen.append(_clip(text, Span(spans[first].start, spans[last].end), per))
    return sorted(chosen, key=lambda s: s.start)


def _found(text: str, spans: list[Span], wanted: list[str]) -> list[Counter[str] | None]:
    """Per unit, how often each query term occurs in it (None: no term).

    A term of FOLD letters matches any word it begins; a shorter one, the whole word.
    Found with ``str.find`` on the lowered text: a few C scans, not a loop over words.
    """
    found: list[Counter[str] | None] = [None] * len(spans)
    if not spans:
        return found
    lower = text.lower()
    starts = [s.start for s in spans]
    for term in wanted:
        whole = len(term) < FOLD
        at = lower.find(term)
        while at >= 0:
            end = at + len(term)
            if (at == 0 or not lower[at - 1].isalnum()) and (
                not whole or end == len(lower) or not lower[end].isalnum()
            ):
                unit = bisect_right(starts, at) - 1
                if unit >= 0:
                    counts = found[unit]
                    if counts is None:
                        counts = found[unit] = Counter()
                    counts[term] += 1
            at = lower.find(term, end)
    return found


def _weights(found: list[Counter[str] | None]) -> dict[str, float]:
    n = len(found)
    df: Counter[str] = Counter()
    for unit in found:
        if unit:
            df.update(unit.keys())
    return {t: math.log(1 + n / d) for t, d in df.items()}


def _best_window(
    spans: list[Span],
    found: list[Counter[str] | None],
    weights: dict[str, float],
    cap: int,
    taken: set[int],
) -> tuple[int, int, float] | None:
    """(first unit, last unit, score) of the best free window within ``cap``; ties: earliest.

    A window's score: each query term it holds, weighted by its rarity among the
    units, times a count that saturates (the second mention adds less than the first).
    """
    best: tuple[int, int, float] | None = None
    # A window starting before its first unit with a query term scores no more than the
    # window starting at that unit: only those starts are tried (the head, when none).
    starts = [i for i, unit in enumerate(found) if unit and i not in taken]
    if not starts:
        starts = [i for i in range(len(spans)) if i not in taken][:1]
    for first in starts:
        tf: Counter[str] = Counter()
        last = first
        for i in range(first, len(spans)):
            if i in taken or (i > first and spans[i].end - spans[first].start > cap):
                break
            counts = found[i]
            if counts:
                tf.update(counts)
            last = i
        score = sum(weights[t] * n / (n + SATURATION) for t, n in tf.items())
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
        wanted = query_terms(query)
        for record in records:
            text = record.content
            if not text or len(text) <= self.config.max_chars:
                continue
            spans = select(text, query, self.config, wanted)
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
