"""The async client of a Qdrant server store: REST or gRPC, credential, TLS, timeout.

Changes with how a server is reached (qdrant-client's constructor), not with
what is read. Every REST answer passes :func:`connectors.qdrant.answers.check_answer`
first (an httpx response hook; qdrant-client hands its extra keyword arguments to
``httpx.AsyncClient``, as its constructor documents), and a store's unit tests give
the client an httpx transport the same way (``transport=httpx.MockTransport(handler)``:
no socket). The credential is an API key or a JWT access token; Qdrant takes
either in the same ``api-key`` header (REST) or metadata (gRPC), so both travel
as qdrant-client's ``api_key``. It is never logged.
"""

from __future__ import annotations

import logging
import math
import ssl
import warnings
from typing import TYPE_CHECKING, Any

from connectors.errors import EngineConfigError

if TYPE_CHECKING:
    import httpx
    from qdrant_client import AsyncQdrantClient

    from connectors.qdrant.spec import QdrantConnectionSpec

log = logging.getLogger("connectors.qdrant.connector")


def _tls(c: QdrantConnectionSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(httpx kwargs, gRPC options) for the server's TLS: a CA bundle, or no checking (REST).

    Raises:
        EngineConfigError: ``connection.ca_certs`` cannot be read as PEM.
    """
    if c.ca_certs is None:
        return ({} if c.verify_certs else {"verify": False}), {}
    try:
        context = ssl.create_default_context(cafile=c.ca_certs)
        with open(c.ca_certs, "rb") as fh:
            pem = fh.read()
    except (OSError, ssl.SSLError) as exc:
        log.debug("qdrant ca_certs unreadable: %r", exc)
        raise EngineConfigError("connection.ca_certs cannot be read as a PEM bundle") from None
    return {"verify": context}, {"root_certificates": pem}


def server_client(
    c: QdrantConnectionSpec, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None
) -> AsyncQdrantClient:
    """A client for ``c.url`` (REST, or gRPC on ``c.grpc_port`` with ``prefer_grpc``); its
    REST requests go through ``transport`` when given (else httpx's own, on sockets).

    Raises:
        EngineConfigError: the URL or TLS settings are unusable.
    """
    from qdrant_client import AsyncQdrantClient

    from connectors.qdrant.answers import check_answer

    assert c.url is not None
    credential = c.api_key if c.api_key is not None else c.access_token
    key = credential.get_secret_value() if credential is not None else None
    https = c.url.startswith("https://")
    if key is not None and not https:
        log.warning("qdrant: a credential is sent over plain http")
    rest_tls, grpc_options = _tls(c)
    rest: dict[str, Any] = {**rest_tls, "event_hooks": {"response": [check_answer]}}
    if transport is not None:
        rest["transport"] = transport
    try:
        with warnings.catch_warnings():
            # The client warns about a key over http (logged above), and pytest runs with
            # warnings as errors.
            warnings.simplefilter("ignore", UserWarning)
            return AsyncQdrantClient(
                url=c.url,
                https=https,
                api_key=key,
                prefer_grpc=c.prefer_grpc,
                grpc_port=c.grpc_port,
                grpc_options=grpc_options or None,
                timeout=max(1, math.ceil(timeout_s)),
                check_compatibility=False,  # it would make a request now, in a thread
                pool_size=c.pool_maxsize,
                **rest,
            )
    except ValueError as exc:
        log.debug("qdrant client refused the connection settings: %s", exc)
        raise EngineConfigError("qdrant connection settings are invalid") from exc
