"""Which client called, for the audit line: bounded, printable, never trusted for anything else.

Taken from what the client says of itself: MCP's ``clientInfo`` (the initialize
request, or a 2026-07-28 request's ``_meta``), else an ``X-Client-Name`` header,
else ``User-Agent``. It is attribution only: no decision reads it, so a client
may lie; it is cut to :data:`MAX_CLIENT_NAME` characters and every character
outside a small printable set becomes ``?``, so it cannot forge a log line or a
field of the JSON log.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

MAX_CLIENT_NAME = 80
"""Longest client name written to the audit line (longer ones are cut)."""

_KEPT = frozenset(string.ascii_letters + string.digits + " ._-/()+:;,@=[]")

CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo"
"""Where a 2026-07-28 MCP request carries its client's name and version."""


def client_name(*said: str | None) -> str | None:
    """The first non-blank of `said`, sanitised and bounded; None when none says anything."""
    for text in said:
        if text is None:
            continue
        cleaned = "".join(c if c in _KEPT else "?" for c in text[:MAX_CLIENT_NAME]).strip()
        if cleaned:
            return cleaned
    return None


def mcp_client(info: Any) -> str | None:
    """`name/version` of an MCP clientInfo (a mapping or the SDK's Implementation), or None."""
    if info is None:
        return None
    if isinstance(info, Mapping):
        name, version = info.get("name"), info.get("version")
    else:
        name, version = getattr(info, "name", None), getattr(info, "version", None)
    if not isinstance(name, str) or not name.strip():
        return None
    return f"{name}/{version}" if isinstance(version, str) and version else name
