"""`a2m-gateway serve | stdio | check | hash-key`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from gateway.config import ConfigError, GatewayConfig, load_config

if TYPE_CHECKING:
    from gateway.auth import Authenticator

log = logging.getLogger("a2m.cli")


def _data_dir() -> Path:
    env = os.environ.get("A2M_DATA_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "a2m-gateway"


def _load(path: str | None) -> GatewayConfig:
    if path is None:
        from gateway.demo import default_demo_config

        return default_demo_config(_data_dir() / "demo")
    return load_config(path)


def _serve(cfg: GatewayConfig, host: str | None, port: int | None) -> int:
    import uvicorn

    from gateway.app import Gateway
    from gateway.auth import check_exposure
    from gateway.metrics import Metrics
    from gateway.transports.http import create_app

    bind = host or cfg.server.host
    try:
        # Checked against the address actually bound, which --host may override.
        for warning in check_exposure(cfg, bind):
            log.warning(warning)
        app_auth = _authenticator(cfg)
    except ConfigError as exc:
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2
    metrics = Metrics()
    gateway = Gateway(
        cfg, observers=[metrics.observe_call], engine_observers=[metrics.observe_engine]
    )
    app = create_app(gateway, cfg.server, metrics, authenticator=app_auth)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=bind,
            port=cfg.server.port if port is None else port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=int(cfg.server.shutdown_grace_s),
            server_header=False,
        )
    )
    server.run()
    return 0


def _authenticator(cfg: GatewayConfig) -> Authenticator:
    """The HTTP authenticator, built before binding so a bad JWKS file fails the start.

    Raises:
        ConfigError: server.auth cannot be used (e.g. an unreadable JWKS file).
    """
    from gateway.auth import Authenticator

    auth = Authenticator(cfg.server.auth)
    if auth.enabled:
        log.info("caller authentication: %s", auth.describe())
    return auth


def _hash_key(new: bool) -> int:
    """Print the config line of an API key: a new random one, or one read from stdin."""
    from gateway.auth import generate_api_key, hash_api_key

    if new:
        key = generate_api_key()
        # The key goes to stderr (shown once, for the operator to hand out); stdout
        # carries only the hash, so `> keys.yaml` never captures the key itself.
        sys.stderr.write(f"new API key (shown once, store it now): {key}\n")
    else:
        key = sys.stdin.readline().strip()
        if len(key) < 32:
            sys.stderr.write("a2m-gateway: an API key must be at least 32 characters\n")
            return 2
    sys.stdout.write(hash_api_key(key) + "\n")
    return 0


async def _stdio(cfg: GatewayConfig, store: str | None) -> int:
    from gateway.app import Gateway
    from gateway.transports.stdio import serve_stdio

    gateway = Gateway(cfg)
    served = gateway.dispatcher(store).store
    if served.config.scope.enforced:
        # stdio carries no credential, so claim filters have nothing to read: fail closed.
        log.warning(
            "store %s is scoped by caller claims; stdio has no authenticated caller, "
            "so every read answers nothing",
            served.name,
        )
    await gateway.start(strict=False)
    try:
        await serve_stdio(gateway.dispatcher(store))
    finally:
        await gateway.close()
    return 0


async def _check(cfg: GatewayConfig) -> int:
    from connectors.errors import ConnectorError
    from gateway.app import Gateway
    from gateway.vectorcheck import compare_stored_vectors

    gateway = Gateway(cfg)
    failed = 0
    try:
        for name, store in gateway.stores.items():
            out: dict[str, Any] = {"store": name, "backend": store.config.backend.value}
            try:
                await store.ensure_started()
                out["describe"] = store.describe()
                out["sample"] = await store.sample(3)
                agreement = await compare_stored_vectors(store)
                if agreement is not None:
                    out["vectors"] = agreement.to_dict()
                    if not agreement.agrees:
                        log.warning(
                            "store %s: stored vectors disagree with embedder %s on the records' "
                            "own content (min cosine %.3f over %d): dense queries will rank "
                            "meaninglessly; configure the model the corpus was embedded with",
                            name,
                            store.embedder.model_name if store.embedder else None,
                            agreement.min_cosine,
                            agreement.compared,
                        )
                out["ok"] = True
            except ConnectorError as exc:
                failed += 1
                out["ok"] = False
                out["error"] = f"{type(exc).__name__}: {exc}"
            sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    finally:
        await gateway.close()
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="a2m-gateway", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="serve A2M over HTTP (default: the embedded demo)")
    p_serve.add_argument("--config", help="config YAML; omitted: the embedded demo store")
    p_serve.add_argument("--host")
    p_serve.add_argument("--port", type=int)
    p_stdio = sub.add_parser("stdio", help="serve one store over stdin/stdout")
    p_stdio.add_argument("--config")
    p_stdio.add_argument("--store", help="store name (default: the first)")
    p_check = sub.add_parser("check", help="validate config, reach engines, preview records")
    p_check.add_argument("--config")
    p_hash = sub.add_parser(
        "hash-key", help="print sha256:<hex> of an API key read from stdin (for server.auth)"
    )
    p_hash.add_argument(
        "--new", action="store_true", help="generate a random key (printed on stderr) instead"
    )
    args = parser.parse_args(argv)
    if args.command == "hash-key":
        return _hash_key(args.new)

    from gateway.logsetup import configure

    try:
        cfg = _load(args.config)
    except ConfigError as exc:
        configure()
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2
    configure(cfg.server.log_format, cfg.server.log_level)
    if args.command == "serve":
        return _serve(cfg, args.host, args.port)
    if args.command == "stdio":
        if args.store is not None and args.store not in cfg.stores:
            sys.stderr.write(f"a2m-gateway: no store named {args.store!r} in the config\n")
            return 2
        return asyncio.run(_stdio(cfg, args.store))
    return asyncio.run(_check(cfg))


if __name__ == "__main__":
    raise SystemExit(main())
