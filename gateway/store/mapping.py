"""RecordMapper: the one place an engine document becomes an A2M record.

It also answers the reverse question the store needs for `where`: which
engine field, if any, an A2M field name or metadata key stands for. Only
mapped fields ever leave the gateway.
"""

from __future__ import annotations

import mimetypes
import string
from typing import Any
from urllib.parse import urlsplit

from connectors.base import ID_FIELD, Hit, value_at
from gateway.a2m.records import Record, parse_timestamp
from gateway.config import MappingConfig
from gateway.stages.passages import passage_metadata

# Record fields that a `where` equality may test, when the mapping exposes them.
FILTERABLE_FIELDS = ("id", "key", "group", "role", "uri", "media_type", "owner")
# Record fields tested through their own filter kinds (phrase + exact check, time windows).
TIME_FIELDS = ("created_at", "updated_at")
# Record fields that exist but are not stored values an engine filter could test.
UNFILTERABLE_FIELDS = frozenset({"score", "embedding"})

_EXTRA_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".jsonl": "application/jsonl"}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        parts = [str(v) for v in value if v is not None]
        return " ".join(parts) if parts else None
    return value if isinstance(value, str) else str(value)


def media_type_from_uri(uri: str) -> str | None:
    path = urlsplit(uri).path
    dot = path.rfind(".")
    if dot < 0:
        return None
    ext = path[dot:].lower()
    return _EXTRA_TYPES.get(ext) or mimetypes.types_map.get(ext)


class RecordMapper:
    """Maps engine hits to records per the store's `mapping:` config."""

    def __init__(self, mapping: MappingConfig) -> None:
        self._m = mapping
        # Parsed once; rendered by hand because str.format would read '{a.b}' as an attribute.
        self._template_parts: list[tuple[str, str | None]] = [
            (literal, name)
            for literal, name, _, _ in string.Formatter().parse(mapping.content_template or "")
        ]

    def to_record(self, hit: Hit, *, with_embedding: bool = False, ranked: bool = True) -> Record:
        """The record of `hit`; it carries the engine's score unless `ranked` is False.

        The one place an engine score is kept or dropped: ordered reads, fetch and
        samples pass ranked=False and carry none, whatever a connector left on the hit.
        """
        m, src = self._m, hit.source
        rid = hit.id if m.id == ID_FIELD else (_text(value_at(src, m.id)) or hit.id)
        uri = _text(value_at(src, m.uri)) if m.uri else None
        if m.media_type:
            media_type = _text(value_at(src, m.media_type))
        elif m.media_type_value:
            media_type = m.media_type_value
        elif m.media_type_from_uri and uri:
            media_type = media_type_from_uri(uri)
        else:
            media_type = None
        metadata: dict[str, Any] | None = None
        if m.metadata:
            metadata = {}
            for name in m.metadata:
                value = value_at(src, name)
                if value is not None:
                    metadata[name] = value
        if hit.passages is not None and ranked:
            # The engine chose the passages (search.passages): the content stays whole
            # here, their offsets in it, and the passage stage cuts it to them.
            p = hit.passages
            content: str | None = self._content(src)
            where = passage_metadata(list(p.spans), list(p.texts), p.length, uri, p.best)
            metadata = {**(metadata or {}), "passage": where}
        elif hit.highlight is not None:
            content = hit.highlight
        else:
            content = self._content(src)
        # Positional, in Record's field order: keywords are a tenth of a record's cost.
        return Record(
            rid,
            content,
            _text(value_at(src, m.role)) if m.role else None,
            metadata,
            _text(value_at(src, m.group)) if m.group else None,
            _text(value_at(src, m.owner)) if m.owner else None,
            _text(value_at(src, m.key)) if m.key else None,
            # Every record carries created_at (§3.1): the store's fallback where there is none.
            (parse_timestamp(value_at(src, m.created_at)) if m.created_at else None)
            or m.created_at_fallback,
            parse_timestamp(value_at(src, m.updated_at)) if m.updated_at else None,
            uri,
            media_type,
            hit.score if ranked else None,
            hit.vector if with_embedding else None,
        )

    def _content(self, src: dict[str, Any]) -> str | None:
        if self._m.content:
            return _text(value_at(src, self._m.content))
        if self._template_parts:
            out: list[str] = []
            found = False
            for literal, name in self._template_parts:
                out.append(literal)
                if name:
                    value = _text(value_at(src, name))
                    found = found or bool(value)
                    out.append(value or "")
            return "".join(out).strip() if found else None
        return None

    def where_keys(self) -> list[str]:
        """The record fields and metadata keys a `where` equality can test on this store.

        Any other key matches nothing (A2M: a field the store does not expose).
        """
        names = [n for n in FILTERABLE_FIELDS if self.engine_field(n) is not None]
        return names + [n for n in self._m.metadata if n not in names]

    def engine_field(self, name: str) -> str | None:
        """The engine field behind an A2M field name or metadata key; None if not exposed."""
        m = self._m
        if name == "id":
            return m.id
        if name in FILTERABLE_FIELDS or name in TIME_FIELDS or name == "content":
            field = getattr(m, name)
            return field if isinstance(field, str) and field else None
        if name in m.metadata:
            return name
        return None
