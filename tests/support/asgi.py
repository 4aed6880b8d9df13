"""The gateway's HTTP app driven in this process by an httpx client: no socket, no server.

The base URL is a loopback name: a gateway bound to loopback accepts only loopback Host names.
"""

from __future__ import annotations

from typing import Any

import httpx

from gateway.observability.metrics import Metrics
from gateway.runtime import Gateway
from gateway.transports.http import create_app


def http_app(gateway: Gateway, metrics: Metrics | None = None) -> Any:
    """The ASGI app `serve` runs for `gateway` (its lifespan is not entered)."""
    return create_app(gateway, gateway.config.server, metrics or Metrics())


def app_client(
    app: Any,
    *,
    timeout: float = 30.0,
    peer: tuple[str, int] | None = None,
    raise_app_exceptions: bool = True,
    **client: Any,
) -> httpx.AsyncClient:
    """An async client whose requests go straight into `app`; `peer` is the caller's address."""
    transport = httpx.ASGITransport(
        app=app, raise_app_exceptions=raise_app_exceptions, client=peer or ("127.0.0.1", 123)
    )
    return httpx.AsyncClient(
        transport=transport, base_url="http://localhost", timeout=timeout, **client
    )


def asgi_client(gateway: Gateway, *, timeout: float = 30.0) -> httpx.AsyncClient:
    """A client of `gateway`'s HTTP app (open the stores first where the test reads them)."""
    return app_client(http_app(gateway), timeout=timeout)
