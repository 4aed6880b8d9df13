"""The A2M record and its wire form (docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any


@dataclass(slots=True)
class Record:
    id: str
    content: str | None = None
    role: str | None = None
    metadata: dict[str, Any] | None = None
    group: str | None = None
    owner: str | None = None
    key: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    uri: str | None = None
    media_type: str | None = None
    score: float | None = None
    embedding: list[float] | None = None

    def to_wire(self) -> dict[str, Any]:
        """JSON-ready dict: absent fields omitted, timestamps RFC 3339 UTC with ms and Z."""
        # content and created_at are required on every record (§3.1).
        out: dict[str, Any] = {"id": self.id, "content": self.content or ""}
        if self.role is not None:
            out["role"] = self.role
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.group is not None:
            out["group"] = self.group
        if self.owner is not None:
            out["owner"] = self.owner
        if self.key is not None:
            out["key"] = self.key
        out["created_at"] = format_timestamp(self.created_at or EPOCH)
        if self.updated_at is not None:
            out["updated_at"] = format_timestamp(self.updated_at)
        if self.uri is not None:
            out["uri"] = self.uri
        if self.media_type is not None:
            out["media_type"] = self.media_type
        if self.score is not None:
            out["score"] = self.score
        if self.embedding is not None:
            out["embedding"] = self.embedding
        return out


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=4096)
def format_timestamp(ts: datetime) -> str:
    """'2026-07-28T10:15:30.123Z' (§3.3); naive datetimes are taken as UTC.

    Cached: a page often repeats a timestamp (a store's created_at fallback on every record).
    """
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    ts = ts.astimezone(UTC)
    # Not strftime: it writes year 999 as '999', not the '0999' RFC 3339 requires.
    return (
        f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}T{ts.hour:02d}:{ts.minute:02d}:"
        f"{ts.second:02d}.{ts.microsecond // 1000:03d}Z"
    )


def parse_timestamp(value: Any) -> datetime | None:
    """An engine's date value as an aware UTC datetime, or None when it is not a date.

    Accepts ISO 8601 strings (with or without zone; date-only), epoch
    milliseconds as numbers or digit strings (Elasticsearch's default
    ``epoch_millis`` format), and datetime/date objects.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value) / 1000.0, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if len(text) == 4 and text.isdigit():
            # "2026" is the year 2026 (ISO 8601 reduced precision), not 2.026 s after 1970.
            return datetime(int(text), 1, 1, tzinfo=UTC) if text != "0000" else None
        if text.lstrip("-").isdigit():
            if len(text) > 20:  # beyond any epoch-millis date, and int() refuses > 4300 digits
                return None
            return parse_timestamp(int(text))
        try:
            parsed = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None
