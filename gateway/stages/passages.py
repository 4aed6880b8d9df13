"""Passage selection in the gateway: the windows of a long text that best answer a query.

The candidate windows and their scores are gateway.stages.windows'; the best, at
most ``count``, not overlapping and from different paragraphs while there are
any, are the passages, in text order, together within ``max_chars``. A text
within the cap is its own passage and costs no scoring; a text without a query
term gives its head.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import quote, urlsplit

from gateway.a2m.records import Record
from gateway.stages.config import PassagesConfig
from gateway.stages.rank import (
    RANK_K,
    Unit,
    best_paragraph_scores,
    counted,
    fused_order,
    paragraphs_of,
    scanned,
)
from gateway.stages.scan import SCAN_CHARS, Scan
from gateway.stages.terms import find
from gateway.stages.windows import FOLD, Span, choose, unit_end, windows

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
MIN_SHARE = 150
"""Fewest characters of passage text a folded record is given (what decides how many of a
group's records fold into one within ``max_chars``)."""
FRAGMENT_SCHEMES = frozenset({"http", "https"})
"""Schemes whose documents a browser opens at a text fragment (``#:~:text=``)."""
SECTION_CHARS = 150
"""Fewest characters of a paragraph that counts as a section (:func:`sectioned`): more than
a heading or a title line."""
FOLD_SEPARATOR = "\n\n"
"""Between the texts of a group's records folded into one content (gateway.stages.groups)."""


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
    """The passages of ``text`` for ``query``: at most ``config.count``, within ``max_chars``
    together (with SEPARATOR between them). ``wanted``: ``query_terms(query)``, when the
    caller has them already."""
    return selected(text, config, query_terms(query) if wanted is None else wanted).spans


class Selection(NamedTuple):
    """:func:`selected`'s answer."""

    spans: list[Span]
    """The passages, in text order."""
    best: int
    """The index in ``spans`` of the best-scoring one (0 when none holds a query term)."""
    units: list[Unit] | None
    """The paragraphs holding them as gateway.stages.rank scores them (None: not asked
    for, or ``text`` was not scanned)."""


def selected(
    text: str, config: PassagesConfig, wanted: list[str], units: bool = False
) -> Selection:
    """:func:`select`'s passages of ``text`` for the query terms ``wanted`` and, with
    ``units``, the paragraphs holding them as the rank scores them (gateway.stages.rank,
    counted from the hits the selection found). Only the first SCAN_CHARS characters
    of ``text`` are read."""
    cap = config.max_chars
    if len(text) <= cap:
        return Selection([Span(0, len(text))] if text else [], 0, None)
    if len(text) > SCAN_CHARS:
        text = text[:SCAN_CHARS]  # offsets in the head are the content's
    per = max(cap // config.count - len(SEPARATOR), 1)
    paragraphs = config.unit == "paragraph"
    scan = Scan(text)
    terms_ = scan.terms(wanted)
    hits = find(scan, wanted)
    found = windows(scan.view, terms_, per, paragraphs, config.count, hits)
    if not found:
        spans = [Span(0, unit_end(text, 0, per, paragraphs))]
        # No query term in the text: its paragraphs count none.
        return Selection(
            spans, 0, [({}, hi - lo) for lo, hi in paragraphs_of(text, spans)] if units else None
        )
    chosen = choose(found, config.count)
    best = chosen.index(Span(found[0].start, found[0].end))  # always chosen
    at = scan.chars([p for s in chosen for p in s])
    spans = [Span(at[i], at[i + 1]) for i in range(0, len(at), 2)]
    if not units:
        return Selection(spans, best, None)
    return Selection(spans, best, counted(scan, hits[0], hits[1], chosen))


def sectioned(text: str | None) -> bool:
    """``text`` holds at least two paragraphs (blank-line separated) of SECTION_CHARS or
    more in its first SCAN_CHARS characters: a document made of sections, not one section
    under a heading."""
    if not text:
        return False
    found = start = 0
    limit = min(len(text), SCAN_CHARS)
    while True:
        end = text.find("\n\n", start, limit)
        stop = limit if end < 0 else end
        if len(text[start:stop].strip()) >= SECTION_CHARS:
            found += 1
            if found == 2:
                return True
        if end < 0:
            return False
        start = end + 2


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
    (the whole content's characters), ``best`` (the index in ``offsets`` of the passage
    that scored highest: the engine's first, or the gateway's best window) and, where the
    record's ``uri`` scheme allows, ``uri`` (the record's ``uri`` with a text fragment at
    the first passage).
    """

    name = "passages"

    def __init__(
        self, config: PassagesConfig, *, by_engine: bool = False, rank: bool | None = None
    ) -> None:
        """``by_engine``: the engine's highlighter chose the passages (the connector's
        records arrive whole, with ``metadata.passage``). ``rank``: re-order the page
        (gateway.stages.rank); None: ``config.ranks()``."""
        self.config = config
        self.by_engine = by_engine
        self.rank = config.ranks() if rank is None else rank
        self._shares: dict[int, PassagesConfig] = {}

    def describe(self) -> dict[str, object]:
        c = self.config
        if self.by_engine:
            return {"stage": self.name, "by": "engine", "max_chars": c.max_chars, "count": c.count}
        return {"stage": self.name, "max_chars": c.max_chars, "count": c.count, "unit": c.unit}

    def describe_rank(self) -> dict[str, object] | None:
        """describe's entry for the re-ordering by best passage (``rank``), when it is on."""
        if not self.rank:
            return None
        return {"stage": "rank", "by": "best_paragraph", "k": RANK_K}

    def apply(
        self, records: list[Record], query: str, folds: list[list[Record]] | None = None
    ) -> None:
        """Cut each record's content to its passage(s), in place; with ``rank``, re-order
        ``records`` (and ``folds`` with them) by gateway.stages.rank, the page's scores
        given out best first in the new order (so they still descend).

        ``folds``: per record, the records to be folded into it (gateway.stages.groups);
        such a record and its folded ones share ``max_chars`` (and ``count``) evenly, and
        only as many are kept (the best-ranked; the list is cut in place) as leave each
        at least MIN_SHARE characters.
        """
        wanted = query_terms(query)
        # The rank adds what the engine does not see, which section of a document answers:
        # a page keeps its order unless each of its records holds sections (a chunk of one
        # section, or a page mixing such chunks with documents, does not compare alike).
        rank = self.rank and len(records) > 1 and all(sectioned(r.content) for r in records)
        units: list[list[Unit]] = []
        for i, record in enumerate(records):
            folded = folds[i] if folds else []
            if not folded:
                units.append(self._cut(record, wanted, self.config, rank))
                continue
            del folded[max(self.config.max_chars // MIN_SHARE - 1, 0) :]
            share = self._share(1 + len(folded))
            units.append(self._cut(record, wanted, share, rank))
            for r in folded:
                self._cut(r, wanted, share, False)
        if rank:
            order = fused_order(best_paragraph_scores(units))
            scores = sorted((r.score for r in records if r.score is not None), reverse=True)
            records[:] = [records[i] for i in order]
            if folds:
                folds[:] = [folds[i] for i in order]
            if len(scores) == len(records):
                # The page's scores, best first, in the new order: they still descend.
                for record, score in zip(records, scores, strict=True):
                    record.score = score

    def _share(self, pieces: int) -> PassagesConfig:
        c = self.config
        if pieces not in self._shares:
            room = c.max_chars - (pieces - 1) * len(FOLD_SEPARATOR)
            update = {"max_chars": room // pieces, "count": max(c.count // pieces, 1)}
            self._shares[pieces] = c.model_copy(update=update)
        return self._shares[pieces]

    @staticmethod
    def _cut(record: Record, wanted: list[str], config: PassagesConfig, rank: bool) -> list[Unit]:
        """Cut ``record`` to its passages; with ``rank``, the paragraphs gateway.stages.rank
        scores, else []: where the engine chose the passages, the paragraph holding the
        one it ranked first (``best``); where the gateway did, those holding them all
        (counted from its selection's hits); the whole text when it is its own passage."""
        text = record.content or ""
        where = (record.metadata or {}).get("passage")
        if isinstance(where, dict):  # the engine chose the passages (gateway.store.mapping)
            whole = where.get("length") == len(text)
            if whole:
                _engine_cut(record, text, where)
            if record.content and len(record.content) > config.max_chars:
                _shorten(record, config.max_chars)
            if not rank:
                return []
            if whole:
                return scanned(text, _best(where), wanted)
            return scanned(record.content or "", [], wanted)
        if not text or len(text) <= config.max_chars:
            return scanned(text, [], wanted) if rank else []
        spans, best, units = selected(text, config, wanted, units=rank)
        if not spans:
            return scanned(text, [], wanted) if rank else []
        texts = [text[s.start : s.end] for s in spans]
        record.content = SEPARATOR.join(texts)
        offsets = [(s.start, s.end) for s in spans]
        record.metadata = {
            **(record.metadata or {}),
            "passage": passage_metadata(offsets, texts, len(text), record.uri, best),
        }
        return units or []


def _engine_cut(record: Record, text: str, where: dict[str, object]) -> None:
    """A whole content whose ``metadata.passage`` holds the engine's passages' offsets
    (gateway.store.mapping) becomes those passages, joined by SEPARATOR."""
    offsets = where.get("offsets")
    if isinstance(offsets, list) and offsets:
        record.content = SEPARATOR.join(text[s:e] for s, e in offsets)


def _best(where: dict[str, object]) -> list[tuple[int, int]]:
    """The span of the best passage in ``metadata.passage`` (``offsets[best]``; no
    ``best``: all of them)."""
    offsets = where.get("offsets")
    if not isinstance(offsets, list):
        return []
    best = where.get("best")
    if isinstance(best, int) and 0 <= best < len(offsets):
        offsets = offsets[best : best + 1]
    return [(s, e) for s, e in offsets]


def passage_metadata(
    offsets: list[tuple[int, int]],
    texts: list[str],
    length: int,
    uri: str | None,
    best: int | None = None,
) -> dict[str, object]:
    """``metadata.passage``: the passages' ``offsets`` ([start, end) pairs) in the whole
    content of ``length`` characters, ``best`` (the index of the best-scoring one, when
    known) and, where ``uri``'s scheme allows, ``uri`` with a text fragment at the first
    passage."""
    where: dict[str, object] = {"offsets": [[s, e] for s, e in offsets], "length": length}
    if best is not None:
        where["best"] = best
    anchored = text_fragment_uri(uri, texts[0]) if texts else None
    if anchored is not None:
        where["uri"] = anchored
    return where


def _shorten(record: Record, max_chars: int) -> None:
    """Keep the leading passages of a record already cut (by the engine) that fit in
    ``max_chars``, the last one cut at a word's end, with its offsets moved to match;
    a record whose passages and offsets do not pair up is left as it is."""
    meta = record.metadata or {}
    where = meta.get("passage")
    texts = record.content.split(SEPARATOR) if record.content else []
    if not isinstance(where, dict):
        return
    offsets = where.get("offsets")
    if not isinstance(offsets, list) or len(offsets) != len(texts):
        return
    kept: list[str] = []
    spans: list[tuple[int, int]] = []
    room = max_chars
    for text, (start, _end) in zip(texts, offsets, strict=True):
        if kept:
            room -= len(SEPARATOR)
        if room <= 0:
            break
        if len(text) > room:
            cut = text[:room]
            space = cut.rfind(" ")
            text = cut[:space] if space > 0 else cut
        kept.append(text)
        spans.append((start, start + len(text)))
        room -= len(text)
    record.content = SEPARATOR.join(kept)
    best = where.get("best")
    if not (isinstance(best, int) and 0 <= best < len(kept)) or kept[best] != texts[best]:
        best = None  # that passage was cut short or away: not named
    length = int(where.get("length", 0))
    record.metadata = {**meta, "passage": passage_metadata(spans, kept, length, record.uri, best)}
