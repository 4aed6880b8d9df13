"""The gateway as an ASGI application: for any ASGI server, or mounted in another app.

``a2m-gateway serve`` runs this same app on uvicorn. A team that runs its own
application (FastAPI, Starlette) mounts it under a path instead; a mounted app's
lifespan is not run by its parent, so the parent runs it (docs/asgi.md)::

    from fastapi import FastAPI
    from gateway.asgi import create_app

    memory = create_app("gateway.yaml")
    app = FastAPI(lifespan=memory.router.lifespan_context)
    app.mount("/memory", memory)

Authentication (``server.auth``), the MCP endpoints, the try page and the
operator endpoints all work under the mount's path; the stores open when the
lifespan starts and close when it ends.
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette

from gateway.config import GatewayConfig, load_config

__all__ = ["create_app"]


def create_app(config: GatewayConfig | str | Path | None = None) -> Starlette:
    """The ASGI app serving every store of `config` (a config, a YAML file, or None: the demo).

    Raises:
        ConfigError: the file is missing or invalid, or server.auth cannot be used.
        MissingExtra: an embedder's optional package is not installed.
    """
    from gateway.demo import default_demo_config
    from gateway.observability.metrics import Metrics
    from gateway.runtime import Gateway
    from gateway.serve import preflight
    from gateway.transports.http import create_app as create_http_app

    if config is None:
        cfg = default_demo_config()
    elif isinstance(config, GatewayConfig):
        cfg = config
    else:
        cfg = load_config(config)
    authenticator = preflight(cfg, cfg.server.host)
    metrics = Metrics()
    gateway = Gateway(
        cfg, observers=[metrics.observe_call], engine_observers=[metrics.observe_engine]
    )
    return create_http_app(gateway, cfg.server, metrics, authenticator=authenticator)
