"""The TLS context of an engine connection, from the settings the engine clients take.

The clients' own HTTP layers build theirs inside private helpers; the gateway's HTTP
client (:mod:`connectors.http1`) builds the same one here from the public settings:
a given context as it is, or the system's defaults with the CA file, the client
certificate and the verification the store asks for, TLS 1.2 at least.
"""

from __future__ import annotations

import ipaddress
import ssl
from typing import Any


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def client_context(
    host: str,
    *,
    context: ssl.SSLContext | None = None,
    verify: bool = True,
    ca_certs: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
    minimum: Any = None,
) -> ssl.SSLContext:
    """The context for a TLS connection to ``host``.

    ``context`` is used as it is when given. Otherwise: the system's trust store, or
    ``ca_certs``; the host name checked unless ``host`` is an address (a certificate
    names hosts); no verification at all when ``verify`` is False; ``minimum`` a
    :class:`ssl.TLSVersion` (TLS 1.2 when None).

    Raises:
        OSError: a CA or certificate file cannot be read.
        ssl.SSLError: a file holds no usable certificate or key.
    """
    if context is not None:
        return context
    ctx = ssl.create_default_context(cafile=ca_certs)
    if verify:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.check_hostname = not _is_address(host)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if client_cert:
        ctx.load_cert_chain(client_cert, client_key)
    ctx.minimum_version = minimum if isinstance(minimum, ssl.TLSVersion) else ssl.TLSVersion.TLSv1_2
    return ctx
