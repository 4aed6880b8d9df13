"""The page re-ordered by each record's best passage (``search.passages.rank``).

An engine scores a long document as one unit: a document whose eight sections each
hold a few of the query's terms can outrank one with a single section that answers.
This stage scores each record by its best paragraph (blank-line separated) among
those holding its passages, BM25 over the query's terms with the statistics of the
page's such paragraphs (how many hold a term; their mean length in characters), and
fuses that order with the engine's by reciprocal rank (k = :data:`RANK_K`): a record
the engine ranked first and whose passage answers stays first, one whose best
paragraph answers better than its neighbours' moves up. Only the page is
re-ordered: no record enters or leaves it. Query terms are found as passage
selection finds them (gateway.stages.windows: folded, at word starts).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

from gateway.stages.scan import SCAN_CHARS, Scan
from gateway.stages.terms import find

RANK_K = 60
"""The reciprocal-rank constant fusing the engine's order with the paragraphs' (the
hybrid fusion's default ``rrf_k``)."""
K1 = 1.2
"""BM25's term-frequency saturation (Lucene's default)."""
B = 0.75
"""BM25's length normalisation (Lucene's default)."""


Unit = tuple[dict[str, int], int]
"""One paragraph as the rank scores it: its query terms' counts and its length."""


def paragraphs_of(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The paragraphs of ``text`` (blank-line separated) that a span lies in, each once,
    as ``(start, end)`` (a span across a blank line: the paragraphs it joins, as one);
    the whole text when there are no spans."""
    if not spans:
        return [(0, len(text))] if text else []
    out: list[tuple[int, int]] = []
    for start, end in spans:
        lo = text.rfind("\n\n", 0, start)
        lo = 0 if lo < 0 else lo + 2
        hi = text.find("\n\n", end)
        hi = len(text) if hi < 0 else hi
        if (lo, hi) not in out:
            out.append((lo, hi))
    return out


def counted(
    scan: Scan, positions: Sequence[int], terms: Sequence[str], spans: Sequence[tuple[int, int]]
) -> list[Unit]:
    """The paragraphs of the scanned text holding ``spans``, their terms counted from hits
    already found in it (``positions``, sorted, and their ``terms``: what passage
    selection found); ``spans`` and ``positions`` are ``scan.view``'s, a paragraph's
    length the text's characters."""
    out: list[Unit] = []
    for lo, hi in paragraphs_of(scan.view, spans):
        counts: dict[str, int] = {}
        for term in terms[bisect_left(positions, lo) : bisect_left(positions, hi)]:
            counts[term] = counts.get(term, 0) + 1
        out.append((counts, scan.length(lo, hi)))
    return out


def scanned(text: str, spans: Sequence[tuple[int, int]], wanted: list[str]) -> list[Unit]:
    """The paragraphs of ``text`` holding ``spans`` (none: the whole text), each read for at
    most SCAN_CHARS characters from its start, scanned for the query terms ``wanted``
    (gateway.stages.passages.query_terms) as passage selection finds them."""
    # One scan of the paragraphs joined by blank lines (a term's word-start and word-end
    # tests see the same non-letters at a paragraph's edge), each hit counted in its
    # paragraph: the view's positions are bytes where the text is not ASCII.
    parts = [text[lo : min(hi, lo + SCAN_CHARS)] for lo, hi in paragraphs_of(text, spans)]
    joined = "\n\n".join(parts)
    scan = Scan(joined)
    positions, found = find(scan, wanted)
    ascii_ = joined.isascii()
    out: list[Unit] = []
    at = j = 0
    for part in parts:
        end = at + (len(part) if ascii_ else len(part.encode("utf-8")))
        counts: dict[str, int] = {}
        while j < len(positions) and positions[j] < end:
            counts[found[j]] = counts.get(found[j], 0) + 1
            j += 1
        out.append((counts, len(part)))
        at = end + 2
    return out


def best_paragraph_scores(records: Sequence[Sequence[Unit]]) -> list[float]:
    """Per record (its paragraphs holding a passage: :func:`scanned` or :func:`counted`),
    the BM25 score of its best paragraph against the query terms, over the statistics
    of all the page's such paragraphs."""
    units = [u for paragraphs in records for u in paragraphs]
    best = [0.0] * len(records)
    if not units:
        return best
    n = len(units)
    mean = sum(chars for _, chars in units) / n or 1.0
    df: dict[str, int] = {}
    for counts, _ in units:
        for term in counts:
            df[term] = df.get(term, 0) + 1
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    for i, paragraphs in enumerate(records):
        for counts, chars in paragraphs:
            if not counts:
                continue
            norm = K1 * (1 - B + B * chars / mean)
            score = sum(idf[t] * f * (K1 + 1) / (f + norm) for t, f in counts.items())
            if score > best[i]:
                best[i] = score
    return best


def fused_order(scores: Sequence[float], k: int = RANK_K) -> list[int]:
    """The page's new order (indexes into it): the engine's order (the page's own) and
    the order of ``scores`` (higher first, ties by the engine's), fused by reciprocal
    rank; ties keep the engine's order."""
    by_score = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    place = {i: r for r, i in enumerate(by_score)}
    fused = [1 / (k + i + 1) + 1 / (k + place[i] + 1) for i in range(len(scores))]
    return sorted(range(len(scores)), key=lambda i: (-fused[i], i))
