"""Nested passages (``search.nested_passages`` on Elasticsearch/OpenSearch): the kNN leg
searches the passages' own vectors, ranks a document by its best passage, and names it.

The index keeps each document's passages as objects of a ``nested`` field, each with
its text and its vector. The kNN leg searches that vector field (the dialect wraps it:
Elasticsearch's ``knn`` section takes the nested field and ``inner_hits`` as they are,
OpenSearch's ``knn`` query goes inside a ``nested`` query; on both the scope filter
selects parent documents, pre-filtering the kNN search). With passages on
(``search.passages``), the leg asks for each document's best passage (``inner_hits``,
its text and start only): its *anchor*.

An anchor is located in the document's content (its start field when the index keeps
one and the text is there, else its first occurrence); the record's passages are then
led by the highlighter's fragment inside the anchor (else the anchor's head),
followed by the highlighter's best of other paragraphs
(:func:`connectors.lucene.passages.passages_of`). Nothing but the anchors' text
travels; the vectors never do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from connectors.errors import EngineConfigError
from connectors.spec import NestedPassageSpec

Body = dict[str, Any]
Anchor = tuple[str, int | None]
"""A nested passage's text and, when indexed, its start in the content."""


def inner_hits_clause(spec: NestedPassageSpec) -> Body:
    """The ``inner_hits`` asking for a hit's best passage (its text and start only)."""
    fields = [spec.text_field] + ([spec.start_field] if spec.start_field else [])
    return {"size": 1, "_source": {"includes": fields}}


def _relative(field: str, path: str) -> str:
    return field[len(path) + 1 :]


def _value(source: dict[str, Any], field: str, path: str) -> Any:
    # An inner hit's _source is the nested object itself; some engines keep the full path.
    rel = _relative(field, path)
    if rel in source:
        return source[rel]
    node: Any = source
    for part in field.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def anchors_of(raw: Mapping[str, Any], spec: NestedPassageSpec) -> tuple[Anchor, ...]:
    """The best passages the kNN leg matched in one ``_search`` hit, best first (none: ()).

    The answer is parsed JSON: its objects are dicts (checked as such: an abstract
    ``Mapping`` check costs several times more, on every hit of every leg)."""
    inner = raw.get("inner_hits")
    if not inner or not isinstance(inner, dict):
        return ()
    found = inner.get(spec.path)
    hits = found.get("hits", {}).get("hits") if isinstance(found, dict) else None
    if not isinstance(hits, list):
        return ()
    out: list[Anchor] = []
    for hit in hits:
        source = hit.get("_source") if isinstance(hit, dict) else None
        if not isinstance(source, dict):
            continue
        text = _value(source, spec.text_field, spec.path)
        if not isinstance(text, str) or not text.strip():
            continue
        start = _value(source, spec.start_field, spec.path) if spec.start_field else None
        out.append((text, start if isinstance(start, int) and start >= 0 else None))
    return tuple(out)


def anchor_spans(text: str, anchors: Sequence[Anchor]) -> list[tuple[int, int]]:
    """Where each anchor sits in ``text``, best first: at its start when the text is
    there, else at its first occurrence; an anchor not in the text is left out."""
    spans: list[tuple[int, int]] = []
    for passage, start in anchors:
        passage = passage.strip()
        kept = start is not None and text.startswith(passage, start)
        at = start if kept and start is not None else text.find(passage)
        if at >= 0 and (at, at + len(passage)) not in spans:
            spans.append((at, at + len(passage)))
    return spans


def check_nested_version(engine: str, version: str | None, since: tuple[int, int] | None) -> None:
    """Check that the engine's version searches vectors in a ``nested`` field (an
    unknown version, or ``since`` None, passes: the engine's own answer then says).

    Raises:
        EngineConfigError: the version is older than ``since`` (the message names the key).
    """
    if version is None or since is None:
        return
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return
    if (major, minor) < since:
        raise EngineConfigError(
            f"search.nested_passages: {engine} {version} does not search vectors in a "
            f"nested field ({since[0]}.{since[1]} or later does); unset nested_passages "
            "or point vector_field at a document vector"
        )


def check_nested(
    spec: NestedPassageSpec, vector_field: str, fields: Mapping[str, Mapping[str, Any]]
) -> None:
    """Check the nested passages against the flattened index mapping.

    Raises:
        EngineConfigError: ``path`` is not a ``nested`` field, or its text, start or
            vector field is not mapped under it (the message names the key).
    """
    kind = fields.get(spec.path, {}).get("type")
    if kind != "nested":
        raise EngineConfigError(
            f"search.nested_passages.path: field {spec.path!r} is of type "
            f"{kind or 'missing'!r} in the index mapping, not 'nested'"
        )
    for key, field in (
        ("text_field", spec.text_field),
        ("start_field", spec.start_field),
    ):
        if field is not None and field not in fields:
            raise EngineConfigError(
                f"search.nested_passages.{key}: field {field!r} is not in the index mapping"
            )
    if vector_field not in fields:
        raise EngineConfigError(
            f"search.vector_field: field {vector_field!r} is not in the index mapping"
        )
