"""``serve``: one gateway process answering HTTP, from a loaded config to a running uvicorn.

The CLI's ``serve`` and every ``serve --workers N`` worker start the same way:
load the config, refuse what must not be served (an exposed or blind store, an
unusable ``server.auth``), build the gateway and its ASGI app, open the
in-process stores, then hand uvicorn the app. ``check`` shares the refusals
and the start-up error lines.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from connectors.errors import ConnectorError, LocalStorageLocked
from connectors.reach import why_unreachable
from gateway.config import ConfigError, GatewayConfig, load_config

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
    target = c.target()
    if target is not None:
        return target
    return ", ".join(_without_userinfo(u) for u in c.urls())


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
        return f"store {name}: {exc.for_operator()}"
    why = why_unreachable(exc)
    return f"store {name} ({store.backend}, {address(store)}): {exc}" + (f": {why}" if why else "")


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


def listen(host: str, port: int) -> socket.socket:
    """The listening socket of ``host:port`` (inheritable: ``--workers`` processes share it).

    Raises:
        OSError: the address cannot be bound (:func:`cannot_listen` says why in one line).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=2048)
    sock.set_inheritable(True)
    return sock


_LISTEN_HINTS = {
    errno.EADDRINUSE: "another process holds this port: stop it, or pick another with --port "
    "(--port 0 takes any free one)",
    errno.EACCES: "ports below 1024 need privileges: pick another with --port",
    errno.EADDRNOTAVAIL: "this machine has no such address: check --host (or server.host)",
}


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """The one-line start-up error for an address that cannot be bound, with what to do."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    reason = (os.strerror(exc.errno) if exc.errno else str(exc)).lower()
    hint = _LISTEN_HINTS.get(exc.errno or 0)
    return f"cannot listen on {where}: {reason}" + (f"; {hint}" if hint else "")


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
    bind = host or cfg.server.host
    try:
        # Checked against the address actually bound, which --host may override.
        app_auth = preflight(cfg, bind)
    except ConfigError as exc:
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2
    port = cfg.server.port if port is None else port
    announce = sockets is None  # a --workers worker's parent bound (and names) the port
    if sockets is None:
        # Bound before any store opens: a port in use fails in one line, not after start-up.
        try:
            sockets = [listen(bind, port)]
        except OSError as exc:
            sys.stderr.write(f"a2m-gateway: {cannot_listen(bind, port, exc)}\n")
            return 2
    try:
        return _serve(cfg, bind, port, app_auth, sockets, announce=announce)
    finally:
        if announce:  # ours to close, whether or not uvicorn served on it
            for sock in sockets:
                sock.close()


def _serve(
    cfg: GatewayConfig,
    bind: str,
    port: int,
    app_auth: Authenticator,
    sockets: list[socket.socket],
    *,
    announce: bool,
) -> int:
    import uvicorn

    from gateway.observability.metrics import Metrics
    from gateway.runtime import Gateway
    from gateway.transports.http import create_app
    from gateway.transports.uvicorn_config import uvicorn_options

    metrics = Metrics()
    gateway = Gateway(
        cfg, observers=[metrics.observe_call], engine_observers=[metrics.observe_engine]
    )
    app = create_app(gateway, cfg.server, metrics, authenticator=app_auth, bind_host=bind)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=bind,
            port=port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=int(cfg.server.shutdown_grace_s),
            server_header=False,
            **uvicorn_options(cfg.server),
        )
    )
    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            return runner.run(_run(gateway, server, sockets, announce=announce))
    except KeyboardInterrupt:
        # uvicorn has already shut down gracefully; it re-raises SIGINT on the way out.
        sys.stderr.write("a2m-gateway: interrupted (Ctrl-C), stopped\n")
        return EXIT_INTERRUPTED


async def _run(
    gateway: Gateway, server: uvicorn.Server, sockets: list[socket.socket], *, announce: bool
) -> int:
    if not await open_local_stores(gateway):
        return 2
    if announce:
        log.info("listening on %s (Ctrl-C stops it)", url_of(sockets[0]))
    await server.serve(sockets=sockets)
    return 0


def url_of(sock: socket.socket) -> str:
    """The http:// address a listening socket answers on (the real port when 0 was asked)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
