"""The uvicorn.Config keywords of one ``server`` section: the guarded protocol and its limits.

``server.http.protocol`` picks the parser: httptools (the default,
httptools_guard.py) or h11 (h11_guard.py); both close a connection whose request
head is late and refuse one that is too large. Only the chosen one is imported.
"""

from __future__ import annotations

from typing import Any

from gateway.config import ServerConfig

H11_BACKSTOP_BYTES = 1 << 20
"""How far past ``max_header_bytes`` h11's own incomplete-head limit sits: more than one
socket read (256 KiB), so the guard's 431 (h11_guard.py), checked after each read, always
answers first and h11's 400 never does."""


def uvicorn_options(server: ServerConfig) -> dict[str, Any]:
    """The uvicorn.Config keywords for ``server``'s HTTP limits and proxy trust."""
    limits = server.http
    deadline_s = limits.header_timeout_ms / 1000
    protocol: type[Any]
    if limits.protocol == "h11":
        from gateway.transports.h11_guard import guarded_h11

        protocol = guarded_h11(deadline_s, limits.max_header_bytes)
    else:
        from gateway.transports.httptools_guard import guarded_httptools

        protocol = guarded_httptools(deadline_s, limits.max_header_bytes)
    trusted = list(server.trusted_proxies)
    return {
        "http": protocol,
        # Nothing here speaks WebSocket: no upgrade is accepted, and no WebSocket library
        # (wsproto and h11, a tenth of start-up when installed) is imported for one.
        "ws": "none",
        "timeout_keep_alive": limits.keep_alive_s,
        "limit_concurrency": limits.max_connections,
        "h11_max_incomplete_event_size": limits.max_header_bytes + H11_BACKSTOP_BYTES,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise.
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted or [],
    }
