"""Why an engine could not be reached, for the operator's logs and the CLI.

A connector raises :class:`connectors.errors.EngineUnavailable` with a fixed
message and the client library's exception as its cause; the cause's own chain
ends in what the operating system said (a name that does not resolve, a refused
connection, a TLS failure, a timeout). :func:`why_unreachable` reads that chain
and names the kind, never a host, address or certificate subject; the wire
message stays the fixed one.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator

from connectors.errors import EngineTimeout

_ERRNO = {
    errno.ECONNREFUSED: "the connection was refused (nothing listens on that host and port)",
    errno.ECONNRESET: "the connection was reset",
    errno.EHOSTUNREACH: "there is no route to the host",
    errno.ENETUNREACH: "the network is unreachable",
    errno.ETIMEDOUT: "the connection timed out",
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def why_unreachable(exc: BaseException) -> str | None:
    """The kind of failure behind `exc` in words (DNS, refused, TLS, timeout), or None.

    Reads `exc`'s cause chain; the words never name a host or an address.
    """
    for link in _chain(exc):
        if isinstance(link, socket.gaierror):
            return "its host name does not resolve (DNS)"
        if isinstance(link, ssl.SSLCertVerificationError):
            return "its TLS certificate is not trusted (connection.ca_certs, verify_certs)"
        if isinstance(link, ssl.SSLError):
            reason = (link.reason or "handshake failed").lower().replace("_", " ")
            hint = " (is it serving plain http?)" if "wrong version" in reason else ""
            return f"TLS failed: {reason}{hint}"
        if isinstance(link, OSError) and link.errno in _ERRNO:
            return _ERRNO[link.errno]
        if isinstance(link, TimeoutError | EngineTimeout):
            return "it did not answer in time (connection.timeout_ms)"
    return None
