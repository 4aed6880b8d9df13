"""Facts of the A2M draft and shared/spec/DECISIONS.md that several tests check against."""

from __future__ import annotations

RECORD_FIELDS = frozenset(
    {
        "id",
        "content",
        "role",
        "metadata",
        "group",
        "owner",
        "session",
        "key",
        "revision",
        "created_at",
        "updated_at",
        "uri",
        "media_type",
        "score",
        "embedding",
    }
)
"""Every field a record may carry (DECISIONS.md §3); anything else on the wire is a leak."""
