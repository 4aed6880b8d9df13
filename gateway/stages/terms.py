"""The query's terms found in a long text: every term in one pass over it.

:func:`find` answers what ``gateway.stages.windows.find_terms`` answers over a
:class:`~gateway.stages.scan.Scan` (each term at a word start; a term shorter than FOLD
as a whole word), but reads the text once for all the terms that are ASCII letters and
digits, with an Aho-Corasick automaton (leftmost-longest, so no two matches overlap)
over the view's bytes, instead of once per term. None of the occurrences it must report
is lost to an overlap: one starting inside another match would start inside a word (the
terms are letters and digits), and of two starting at one place the shorter is a whole
word that the longer's next letter continues. Any other term (an underscore, a
non-ASCII letter) is found as ``find_terms`` finds it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ahocorasick_rs import MATCHKIND_LEFTMOST_LONGEST, BytesAhoCorasick, Implementation

from gateway.stages.scan import Scan
from gateway.stages.windows import FOLD, find_terms

AUTOMATA = 256
"""Queries whose automaton is kept (built once for a page's records, and again only for
a query not among the last AUTOMATA)."""
_ALNUM = frozenset(c for c in map(chr, range(256)) if c.isalnum())
"""The view's characters (one per byte) that continue a word."""


class _Prepared(NamedTuple):
    plain: tuple[str, ...]
    automaton: BytesAhoCorasick | None
    rest: list[str]


@lru_cache(maxsize=AUTOMATA)
def _prepared(wanted: tuple[str, ...]) -> _Prepared:
    # The terms the automaton finds (ASCII letters and digits), it, and the rest.
    plain = tuple(t for t in wanted if t.isascii() and t.isalnum())
    rest = [t for t in wanted if not (t.isascii() and t.isalnum())]
    if not plain:
        return _Prepared(plain, None, rest)
    # The NFA builds faster than the automaton the library picks by default and searches
    # as fast here, the prefilter finding the candidates either way (docs/benchmarks.md).
    automaton = BytesAhoCorasick(
        [t.encode("ascii") for t in plain],
        matchkind=MATCHKIND_LEFTMOST_LONGEST,
        implementation=Implementation.NoncontiguousNFA,
    )
    return _Prepared(plain, automaton, rest)


def find(scan: Scan, wanted: list[str]) -> tuple[list[int], list[str]]:
    """Where each of the query's terms ``wanted`` (lowered, as
    gateway.stages.passages.query_terms gives them) occurs at a word start in
    ``scan.view``: positions (sorted) and the terms, as ``find_terms(scan.view,
    scan.terms(wanted))`` answers."""
    plain, automaton, rest = _prepared(tuple(wanted))
    positions: list[int] = []
    terms: list[str] = []
    if automaton is not None:
        view = scan.view
        n = len(view)
        for i, start, end in automaton.find_matches_as_indexes(scan.data()):
            if start and view[start - 1] in _ALNUM:
                continue
            term = plain[i]
            if end - start < FOLD and end < n and view[end] in _ALNUM:
                continue
            positions.append(start)
            terms.append(term)
    if not rest:
        return positions, terms
    more = find_terms(scan.view, scan.terms(rest))
    if not more[0]:
        return positions, terms
    hits = sorted([*zip(positions, terms, strict=True), *zip(*more, strict=True)])
    return [h[0] for h in hits], [h[1] for h in hits]
