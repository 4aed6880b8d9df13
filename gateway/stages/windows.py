"""Windows of a long text around the query's terms: where passage selection looks.

The query's terms are found in the lowered text (gateway.stages.terms: one pass for all
of them; :func:`find_terms` here, one ``str.find`` scan a term); each sentence (or
paragraph) that holds one starts a candidate window of up to the cap, ended at the last
sentence end that keeps at least half of it. A window scores its query terms, each
weighted by how rare it is in the text and counted with saturation (the second mention
adds less than the first), so a window that covers more of the question wins over one
that repeats a common word. Windows start from the CANDIDATES hits whose following
characters weigh most and from the heaviest hit of each of the ``spread`` paragraphs
(blank-line separated sections) that weigh most as a whole: a section that answers the
question spreads its terms over more than one sentence, and a window there is scored
even when denser sentences elsewhere outweigh it. The cost grows with the terms found,
not the text's length.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from itertools import accumulate
from typing import NamedTuple

from connectors.text import paragraph_breaks

FOLD = 5
"""Query and text words are compared on their first FOLD letters (a term of FOLD letters
matches any word it begins; a shorter one, the whole word)."""
SATURATION = 2.0
"""How fast a term's repeated mentions in a window stop adding to its score."""
LOOKBACK = 300
"""How far back from a term a window looks for the start of its sentence."""
UNIT_CHARS = 150
"""About a sentence: the text's length over this is the number of units a term's rarity
is measured against."""
CANDIDATES = 8
"""Hits a record's windows start from at most (the rest are not scored): the work per
record stays bounded however often the query's terms occur."""
SHORT_LINE = 60
"""A line shorter than this ends where it breaks (a heading, a list item, a paragraph's
last line); a longer one is prose wrapped at a fixed width, whose break is a space."""
_ENDS = frozenset(".?!:;\n")
_OPENS = frozenset("#-*+>|`")


class Span(NamedTuple):
    """``text[start:end]``."""

    start: int
    end: int


class Window(NamedTuple):
    start: int
    end: int
    score: float
    paragraph: int


def find_terms(lower: str, wanted: list[str]) -> tuple[list[int], list[str]]:
    """Where each wanted term occurs at a word start in ``lower``: positions (sorted), terms."""
    hits: list[tuple[int, str]] = []
    add, find, n = hits.append, lower.find, len(lower)
    for term in wanted:
        size = len(term)
        whole = size < FOLD
        at = find(term)
        while at >= 0:
            end = at + size
            if (at == 0 or not lower[at - 1].isalnum()) and (
                not whole or end == n or not lower[end].isalnum()
            ):
                add((at, term))
            at = find(term, end)
    hits.sort()
    return [h[0] for h in hits], [h[1] for h in hits]


def line_end(text: str, lo: int, hi: int) -> int:
    """The last line break in ``text[lo:hi]`` that ends a sentence-like unit, or -1.

    A break ends one after sentence punctuation, next to a blank line, after a short line
    (SHORT_LINE), or before a line that opens with a capital, a digit or a markdown block
    mark. Other breaks are prose wrapped at a fixed width: a window neither starts nor
    ends at them, so a passage does not begin or stop in mid-sentence.
    """
    at = text.rfind("\n", lo, hi)
    while at >= 0:
        before = text[at - 1] if at > 0 else "\n"
        after = text[at + 1] if at + 1 < len(text) else "\n"
        line_start = text.rfind("\n", 0, at) + 1
        if (
            before in _ENDS
            or after == "\n"
            or at - line_start < SHORT_LINE
            or after.isupper()
            or after.isdigit()
            or after in _OPENS
        ):
            return at
        at = text.rfind("\n", lo, at)
    return -1


def unit_start(text: str, pos: int, paragraphs: bool) -> int:
    """Where the sentence (or paragraph) holding ``pos`` starts, looking back LOOKBACK at most."""
    lo = max(0, pos - LOOKBACK)
    if paragraphs:
        cut = text.rfind("\n\n", lo, pos)
    else:
        rfind = text.rfind
        cut = max(
            rfind(". ", lo, pos),
            rfind("? ", lo, pos),
            rfind("! ", lo, pos),
            line_end(text, lo, pos),
        )
    if cut >= 0:
        start = cut + 1
    elif lo == 0:
        start = 0
    else:
        start = text.find(" ", lo, pos) + 1 or pos
    while start < pos and text[start].isspace():
        start += 1
    return start


def unit_end(text: str, start: int, cap: int, paragraphs: bool) -> int:
    """The end of a window from ``start`` within ``cap``: the last sentence (paragraph) end
    keeping at least half the cap, else the last word end, else the cap."""
    end = start + cap
    if end >= len(text):
        return len(text)
    half = start + cap // 2
    if paragraphs:
        cut = text.rfind("\n\n", half, end)
        cut = cut if cut >= 0 else -1
    else:
        rfind = text.rfind
        cut = max(
            rfind(". ", half, end) + 1,
            rfind("? ", half, end) + 1,
            rfind("! ", half, end) + 1,
            line_end(text, half, end),
        )
    if cut > half:
        return cut
    space = text.rfind(" ", start, end)
    return space if space > start else end


def windows(
    text: str,
    wanted: list[str],
    cap: int,
    paragraphs: bool,
    spread: int = 0,
    hits: tuple[list[int], list[str]] | None = None,
) -> list[Window]:
    """The candidate windows of ``text`` (lowered: a gateway.stages.scan view) for the
    query terms ``wanted``, best first: those starting at the CANDIDATES hits whose
    following ``cap`` characters weigh most (their terms' rarity summed), and at the
    heaviest such hit of each of the ``spread`` paragraphs that weigh most. ``hits``:
    ``find_terms(text, wanted)``, when the caller has it already."""
    positions, terms = find_terms(text, wanted) if hits is None else hits
    if not positions:
        return []
    units = max(len(text) / UNIT_CHARS, 1.0)
    weights = {t: math.log(1 + units / n) for t, n in Counter(terms).items()}
    breaks = paragraph_breaks(text)
    if len(positions) <= CANDIDATES:
        starts = set(positions)  # every hit starts a window: the leaders are among them
    else:
        ahead = _ahead(positions, [weights[t] for t in terms], cap)
        starts = set(_heaviest(ahead, positions, range(len(positions)), CANDIDATES))
        if spread and breaks:
            starts.update(_paragraph_leaders(positions, terms, weights, ahead, breaks, spread))
    out: list[Window] = []
    seen: set[int] = set()
    for pos in sorted(starts):
        start = unit_start(text, pos, paragraphs)
        if start in seen:
            continue
        seen.add(start)
        end = unit_end(text, start, cap, paragraphs)
        first, stop = bisect_left(positions, start), bisect_left(positions, end)
        tf: dict[str, int] = {}
        for t in terms[first:stop]:
            tf[t] = tf.get(t, 0) + 1
        score = sum(weights[t] * n / (n + SATURATION) for t, n in tf.items())
        out.append(Window(start, end, score, bisect_right(breaks, start)))
    out.sort(key=lambda w: (-w.score, w.start))
    return out


def _ahead(positions: list[int], weights: list[float], cap: int) -> list[float]:
    # Per hit, the weight of the hits in its next ``cap`` characters: prefix sums, one pass.
    prefix = list(accumulate(weights, initial=0.0))
    out: list[float] = []
    j, n = 0, len(positions)
    for i, pos in enumerate(positions):
        limit = pos + cap
        while j < n and positions[j] < limit:
            j += 1
        out.append(prefix[j] - prefix[i])
    return out


def _heaviest(ahead: list[float], positions: list[int], hits: range, n: int) -> list[int]:
    # The positions of the ``n`` hits (of ``hits``) weighing most ahead; ties: the earlier.
    return [positions[i] for i in sorted(hits, key=ahead.__getitem__, reverse=True)[:n]]


def _paragraph_leaders(
    positions: list[int],
    terms: list[str],
    weights: dict[str, float],
    ahead: list[float],
    breaks: list[int],
    spread: int,
) -> list[int]:
    # A paragraph weighs the distinct terms it holds; the heaviest hit of each of the
    # ``spread`` heaviest paragraphs leads.
    spans: list[range] = []
    scores: list[float] = []
    first, n = 0, len(positions)
    for cut in [*breaks, positions[-1] + 1]:
        if first == n:
            break
        if positions[first] >= cut:
            continue
        stop = bisect_left(positions, cut, first)
        spans.append(range(first, stop))
        # Its distinct terms in text order (a set's order follows the process's string
        # hashes, and a float sum its order: the same text would rank otherwise elsewhere).
        scores.append(sum(map(weights.__getitem__, dict.fromkeys(terms[first:stop]))))
        first = stop
    top = sorted(range(len(spans)), key=scores.__getitem__, reverse=True)[:spread]
    return [positions[max(spans[p], key=ahead.__getitem__)] for p in top]


def choose(candidates: list[Window], count: int) -> list[Span]:
    """Up to ``count`` non-overlapping windows, best first, each from another paragraph
    while one is left; in text order."""
    chosen: list[Window] = []
    for diverse in (True, False):
        for w in candidates:
            if len(chosen) == count:
                break
            if any(w.start < c.end and c.start < w.end for c in chosen):
                continue
            if diverse and any(w.paragraph == c.paragraph for c in chosen):
                continue
            chosen.append(w)
    return sorted(Span(w.start, w.end) for w in chosen)
