"""Facts of the A2M draft and docs/protocol.md that several tests check against."""

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
"""Every field a record may carry (docs/protocol.md); anything else on the wire is a leak."""


CANONICAL_CODES = {
    # JSON-RPC 2.0
    -32700: "PARSE_ERROR",
    -32600: "INVALID_REQUEST",
    -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS",
    -32603: "INTERNAL_ERROR",
    # A2M 0.1 §7, restated in docs/protocol.md (a closed list)
    -32001: "UNKNOWN_RECORD",
    -32002: "UNKNOWN_TIER",
    -32003: "CAPABILITY_NOT_SUPPORTED",
    -32004: "READ_ONLY",
    -32005: "SCOPE_DENIED",
    -32006: "QUOTA_EXCEEDED",
    -32007: "PROTOCOL_NOT_SUPPORTED",
    -32008: "EMBEDDING_MISMATCH",
}
"""Written out from the spec, not derived from gateway.a2m.errors: a check against a list the
gateway builds itself could not fail."""
