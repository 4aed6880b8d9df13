"""``serve``: one gateway process answering HTTP, from a loaded config to a running uvicorn.

The CLI's ``serve`` and every ``serve --workers N`` worker start the same way:
load the config, refuse what must not be served (an exposed or blind store, an
unusable ``server.auth``), build the gateway and its ASGI app, open the
in-process stores, then hand uvicorn the app. ``check`` shares the refusals
and the start-up error lines.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from connectors.errors import ConnectorError, LocalStorageLocked
from gateway.config import (
    ConfigError,
    ElasticsearchConnection,
    GatewayConfig,
    QdrantConnection,
    load_config,
)

if TYPE_CHECKING:
    import uvicorn

    from gateway.config import StoreConfig
    from gateway.runtime import Gateway
    from gateway.security.auth import Authenticator

log = logging.getLogger("a2m.cli")

EXIT_INTERRUPTED = 130
"""128 + SIGINT, the shell's convention for a process stopped by Ctrl-C."""


def load(path: str | None) -> GatewayConfig:
    """The config of a command: the file at ``path``, or the embedded demo when None.

    Raises:
        ConfigError: the file cannot be read or is not a valid config.
    """
    if path is None:
        from gateway.demo import default_demo_config

        return default_demo_config()  # in memory: any number of processes at once
    return load_config(path)


def address(store: StoreConfig) -> str:
    """Where a store's engine is, from the operator's config, with any URL userinfo dropped."""
    c = store.connection
    if isinstance(c, QdrantConnection):
        if c.path is not None:
            return f"qdrant-edge at {c.path}"
        if c.location is not None:
            return f"qdrant-edge in {c.location}"
        urls = [c.url] if c.url is not None else []
    elif isinstance(c, ElasticsearchConnection) and c.cloud_id is not None:
        return "Elastic Cloud (connection.cloud_id)"
    else:
        urls = c.hosts
    return ", ".join(_without_userinfo(u) for u in urls)


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.hostname is None:
        return url if "@" not in url else "(unparsable host)"
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def start_failure(name: str, store: StoreConfig, exc: ConnectorError) -> str:
    """The one-line start-up error for a store that cannot be opened."""
    if isinstance(exc, LocalStorageLocked):
        return (
            f"store {name}: qdrant storage {exc.path} is locked by another process "
            "(a shard opens in one process at a time); stop that process or give this "
            "store another connection.path"
        )
    return f"store {name} ({store.backend.value}, {address(store)}): {exc}"


def preflight(cfg: GatewayConfig, bind: str) -> Authenticator:
    """What `serve` refuses before it binds, and `check` refuses alike (one sentence each).

    Returns the HTTP authenticator, built before binding so a bad JWKS file fails the start.

    Raises:
        ConfigError: serving this config on ``bind`` would expose or blind a store, or
            server.auth cannot be used.
    """
    from gateway.security.auth import Authenticator, check_exposure

    for warning in check_exposure(cfg, bind):
        log.warning(warning)
    auth = Authenticator(cfg.server.auth)
    if auth.enabled:
        log.info("caller authentication: %s", auth.describe())
    return auth


async def open_local_stores(gateway: Gateway, only: str | None = None) -> bool:
    """Open the in-process stores before serving; False (reported on stderr) if one cannot."""
    from gateway.runtime import StoreStartFailed
    from gateway.threads import favour_the_loop

    served = gateway.served_stores(only) if only else gateway.stores.values()
    favour_the_loop(s.config for s in served)

    try:
        await gateway.open_local_stores(only)
    except StoreStartFailed as exc:
        await gateway.close()
        store = gateway.stores[exc.name].config
        sys.stderr.write(f"a2m-gateway: {start_failure(exc.name, store, exc.cause)}\n")
        return False
    return True


def serve_http(
    cfg: GatewayConfig,
    host: str | None,
    port: int | None,
    *,
    sockets: list[socket.socket] | None = None,
) -> int:
    """One gateway process on HTTP until stopped; the exit status.

    ``sockets``: already listening (a ``--workers`` worker); else ``host:port`` is bound.
    """
    import uvicorn

    from gateway.observability.metrics import Metrics
    from gateway.runtime import Gateway
    from gateway.transports.http import create_app
    from gateway.transports.uvicorn_config import uvicorn_options

    bind = host or cfg.server.host
    try:
        # Checked against the address actually bound, which --host may override.
        app_auth = preflight(cfg, bind)
    except ConfigError as exc:
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2
    metrics = Metrics()
    gateway = Gateway(
        cfg, observers=[metrics.observe_call], engine_observers=[metrics.observe_engine]
    )
    app = create_app(gateway, cfg.server, metrics, authenticator=app_auth, bind_host=bind)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=bind,
            port=cfg.server.port if port is None else port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=int(cfg.server.shutdown_grace_s),
            server_header=False,
            **uvicorn_options(cfg.server),
        )
    )
    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            return runner.run(_run(gateway, server, sockets))
    except KeyboardInterrupt:
        # uvicorn has already shut down gracefully; it re-raises SIGINT on the way out.
        sys.stderr.write("a2m-gateway: interrupted (Ctrl-C), stopped\n")
        return EXIT_INTERRUPTED


async def _run(
    gateway: Gateway, server: uvicorn.Server, sockets: list[socket.socket] | None
) -> int:
    if not await open_local_stores(gateway):
        return 2
    await server.serve(sockets=sockets)
    return 0
