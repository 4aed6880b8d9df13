"""Passages chosen by the engine's highlighter (``search.passages`` on Elasticsearch/OpenSearch).

The unified highlighter scores the content field's sentences against the query (BM25
over the sentences, in the engine) and returns the best ``count`` fragments in text
order, untagged; a hit none of whose sentences holds a query term gets the head of its
content (``no_match_size``). The query is given as ``highlight_query`` (a ``match`` of
the passage text on the content field), so a hit the kNN leg found is highlighted like
one the lexical leg found.

Offsets are exact: each fragment is a (trimmed) substring of the content, found in the
content the same answer carries. Only the page's hits carry their content (the legs of
a hybrid search read ids; the fused page is re-read with its highlights), so the whole
text of every candidate never travels. A fragment that cannot be found, or a content
that is not one string, leaves the hit as it is: the gateway chooses its passages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from connectors.base import Passages, value_at
from connectors.lucene.nested import Anchor, anchor_spans
from connectors.spec import PassageSpec

Body = dict[str, Any]

ANALYSED_CHARS = 999_999
"""Characters of a content the highlighter analyses, at most, where the index's own bound
is not known: one less than the engines' default ``index.highlight.max_analyzed_offset``
(a query's own bound must stay below the index's). Without a bound a longer document
fails the whole search; with it, its passages come from its head."""

ANALYSED_SETTING = "index.highlight.max_analyzed_offset"
"""The index setting that bounds what the highlighter analyses (:func:`analysed_bound`)."""

_SENTENCE_END = re.compile(r"[.?!] |\n")
"""A sentence's end: ". ", "? ", "! " or a line break (the first one is a sentence's start)."""

CANDIDATES_PER_PASSAGE = 2
"""Fragments asked of the engine (best first) per passage kept: the kept ones come from
different paragraphs while there are any, as the gateway's windows do."""


def highlight_clause(
    content: str,
    spec: PassageSpec,
    text: str | None,
    limit_key: str = "max_analyzed_offset",
    analysed: int = ANALYSED_CHARS,
    query_fields: Sequence[str] = (),
) -> Body:
    """The ``highlight`` clause asking for ``spec.count`` passages of ``content``.

    ``text``: what the passages answer, matched on the content field whatever query
    selected the hit (None: the search's own query). Tags are empty: a fragment is
    the document's own text, so it can be found in it. ``limit_key``: the dialect's
    name for the bound on the characters analysed, ``analysed`` (:func:`analysed_bound`).
    ``query_fields``: where ``text`` is matched when the content field is not indexed
    (a ``match`` on it would fail the search); the highlighter still marks the content's
    words, whichever field's analyser made the terms (``require_field_match: false``).
    """
    field: Body = {
        "type": "unified",
        "boundary_scanner": "sentence",
        "fragment_size": spec.fragment_chars,
        "number_of_fragments": spec.count * CANDIDATES_PER_PASSAGE,
        "no_match_size": spec.fragment_chars,
        "order": "score",
    }
    clause: Body = {
        "pre_tags": [""],
        "post_tags": [""],
        "encoder": "default",
        "require_field_match": False,
        limit_key: analysed,
        "fields": {content: field},
    }
    if text and query_fields:
        clause["highlight_query"] = {"multi_match": {"query": text, "fields": list(query_fields)}}
    elif text:
        clause["highlight_query"] = {"match": {content: {"query": text}}}
    return clause


def analysed_bound(settings: Mapping[str, Any]) -> int:
    """The highlighter's bound on the characters it analyses in one search of the indices
    whose ``GET <index>/_settings/index.highlight.max_analyzed_offset?include_defaults``
    answer is ``settings``: one less than the lowest of their bounds (an index over its
    bound fails the whole search), :data:`ANALYSED_CHARS` when none can be read."""
    bounds: list[int] = []
    for index in settings.values():
        if not isinstance(index, Mapping):
            continue
        for part in ("settings", "defaults"):
            value = index.get(part)
            value = value.get(ANALYSED_SETTING) if isinstance(value, Mapping) else None
            if isinstance(value, (str, int)) and str(value).isdigit() and int(value) > 1:
                bounds.append(int(value))
                break
    return min(bounds) - 1 if bounds else ANALYSED_CHARS


def fragments_of(raw: Mapping[str, Any], content: str) -> list[str]:
    """The highlight fragments of one ``_search`` hit for ``content`` (none: [])."""
    highlight = raw.get("highlight")
    if not highlight or not isinstance(highlight, dict):  # parsed JSON: dicts
        return []
    found = highlight.get(content)
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def passages_of(
    source: Mapping[str, Any],
    content: str,
    fragments: Sequence[str],
    spec: PassageSpec,
    anchors: Sequence[Anchor] = (),
) -> Passages | None:
    """The hit's passages: its fragments located in its content, each cut to
    ``spec.fragment_chars``, in text order (``best``: the highlighter's first). With
    ``anchors`` (the nested passages the kNN leg matched, :mod:`connectors.lucene.nested`)
    found in the content, the passage inside them leads (:func:`anchored`) and is
    ``best``. None: the content is one string within
    ``spec.max_chars`` (it is its own passage), is not one string, or neither a
    fragment nor an anchor is in it."""
    text = value_at(source, content)
    if not isinstance(text, str) or len(text) <= spec.max_chars:
        return None
    cap = spec.fragment_chars
    spans = locate(text, fragments, cap) if fragments else None
    regions = anchor_spans(text, anchors) if anchors else []
    if regions:
        spans = anchored(text, spans or [], regions, cap)
    if not spans:
        return None
    chosen = choose(text, spans, spec.count)
    best = chosen.index(spans[0])  # the ranked first is always chosen
    spans = widen(text, chosen, cap)
    return Passages(tuple(spans), tuple(text[s:e] for s, e in spans), len(text), best)


def anchored(
    text: str, ranked: list[tuple[int, int]], regions: list[tuple[int, int]], cap: int
) -> list[tuple[int, int]]:
    """The ranked fragment spans, those starting inside the best anchor's region first
    (else the region's head in their place), the others after them: the passage the kNN
    leg matched best leads, the highlighter's best of other paragraphs follow. A
    fragment that only runs into the region (the highlighter's sentences can cross a
    blank line) is not inside it."""
    start, end = regions[0]
    inside = [s for s in ranked if start <= s[0] < end]
    if not inside:
        inside = [(start, cut(text, start, end, cap))]
    return inside + [s for s in ranked if s not in inside]


def locate(text: str, fragments: Sequence[str], cap: int) -> list[tuple[int, int]] | None:
    """Where each fragment sits in ``text`` (its first occurrence), in the fragments' order,
    each span cut to ``cap`` characters at the last word end within it; None when one is
    not found."""
    spans: list[tuple[int, int]] = []
    find = text.find
    for fragment in fragments:
        fragment = fragment.strip()
        if not fragment:
            continue
        start = find(fragment)
        if start < 0:
            return None
        end = start + len(fragment)
        spans.append((start, end if end - start <= cap else cut(text, start, end, cap)))
    return spans or None


def choose(text: str, ranked: Sequence[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """Up to ``count`` of the ``ranked`` spans (best first), not overlapping, each from
    another paragraph (blank-line separated) while one is left; in text order."""
    # A paragraph is named by the last blank line at or before a span's start (a start
    # is never inside a run of line breaks: fragments and anchors are stripped).
    rfind = text.rfind
    chosen: list[tuple[int, int]] = []
    used: set[int] = set()
    passed: list[tuple[int, int]] = []  # the spans the first round left, best first
    for span in ranked:
        if len(chosen) == count:
            return sorted(chosen)
        paragraph = rfind("\n\n", 0, span[0] + 1)
        if paragraph in used or _overlaps(span, chosen):
            passed.append(span)
        else:
            chosen.append(span)
            used.add(paragraph)
    for span in passed:
        if len(chosen) == count:
            break
        if not _overlaps(span, chosen):
            chosen.append(span)
    return sorted(chosen)


def _overlaps(span: tuple[int, int], chosen: list[tuple[int, int]]) -> bool:
    start, end = span
    for s, e in chosen:  # noqa: SIM110 - a loop: no generator made per span
        if start < e and s < end:
            return True
    return False


def cut(text: str, start: int, end: int, cap: int) -> int:
    """The end of ``text[start:end]`` kept within ``cap`` characters: ``end`` when it
    fits, else the last word end before the cap (else the cap)."""
    if end - start <= cap:
        return end
    limit = start + cap
    space = text.rfind(" ", start, limit + 1)
    stop = space if space > start else limit
    while stop > start and text[stop - 1].isspace():
        stop -= 1
    return stop


def widen(text: str, spans: list[tuple[int, int]], cap: int) -> list[tuple[int, int]]:
    """Each span (in text order) run on to ``cap`` characters: forward to the last
    sentence end that keeps at least half of it (else a word end), then, with room left
    (the paragraph or the text ended), back to a sentence start of its paragraph; never
    into a neighbour. A short fragment (a few words, a sentence's tail) still carries
    its context."""
    out: list[tuple[int, int]] = []
    for i, (start, end) in enumerate(spans):
        after = spans[i + 1][0] if i + 1 < len(spans) else len(text)
        end = _forward(text, start, end, min(start + cap, after), cap)
        before = out[-1][1] if out else 0
        start = _backward(text, start, max(before, end - cap))
        out.append((start, end))
    return out


def _forward(text: str, start: int, end: int, stop: int, cap: int) -> int:
    if stop > end:
        lo, rfind = max(end, start + cap // 2), text.rfind
        # The last sentence end (". ", "? ", "! " or a line break) in [lo, stop).
        cut_at = max(
            rfind(". ", lo, stop),
            rfind("? ", lo, stop),
            rfind("! ", lo, stop),
            rfind("\n", lo, stop),
        )
        if cut_at > 0:
            end = cut_at + (0 if text[cut_at] == "\n" else 1)
        elif stop == len(text):
            end = stop
        else:
            space = text.rfind(" ", end, stop)
            end = space if space > end else end
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _backward(text: str, start: int, lo: int) -> int:
    # The earliest sentence start in [lo, start) that stays in the span's paragraph.
    if lo >= start:
        return start
    para = text.rfind("\n\n", lo, start)
    if para >= 0:
        lo = para + 2
    mark = _SENTENCE_END.search(text, lo, start)
    if mark is None:
        return start
    at = mark.start()
    new = at + (1 if text[at] == "\n" else 2)
    while new < start and text[new].isspace():
        new += 1
    return new if new < start else start
