"""a2m-gateway: a read-only A2M 0.1 (Agent-to-Memory) server in front of the search indexes
you already run (Elasticsearch, OpenSearch, Qdrant).

Agents call memory/describe, memory/recall, memory/timeline and memory/fetch over HTTP
(`serve`, which also serves MCP at /mcp) or stdin/stdout (`stdio`, and `mcp` for MCP
clients); writes answer READ_ONLY. Without --config every
command uses the embedded demo store: the gateway's own documentation, indexed in memory
at start, nothing downloaded.

  a2m-gateway serve                          # the demo on http://127.0.0.1:8080
  a2m-gateway recall "how are scores normalised?"
  a2m-gateway check --config my.yaml         # reach each engine, preview 3 mapped records
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from connectors.errors import ConnectorError, EngineTimeout, EngineUnavailable, LocalStorageLocked
from gateway.config import (
    ConfigError,
    ElasticsearchConnection,
    GatewayConfig,
    QdrantConnection,
    load_config,
)
from gateway.embedders.base import MissingExtra

if TYPE_CHECKING:
    import uvicorn

    from gateway.config import StoreConfig
    from gateway.runtime import Gateway
    from gateway.security.auth import Authenticator

log = logging.getLogger("a2m.cli")


EXIT_INTERRUPTED = 130
"""128 + SIGINT, the shell's convention for a process stopped by Ctrl-C."""


def _load(path: str | None) -> GatewayConfig:
    if path is None:
        from gateway.demo import default_demo_config

        return default_demo_config()  # in memory: any number of processes at once
    return load_config(path)


def _address(store: StoreConfig) -> str:
    """Where a store's engine is, from the operator's config, with any URL userinfo dropped."""
    c = store.connection
    if isinstance(c, QdrantConnection):
        if c.path is not None:
            return f"local mode at {c.path}"
        if c.location is not None:
            return f"local mode in {c.location}"
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


def _start_failure(name: str, store: StoreConfig, exc: ConnectorError) -> str:
    """The one-line start-up error for a store that cannot be opened."""
    if isinstance(exc, LocalStorageLocked):
        return (
            f"store {name}: qdrant local mode storage {exc.path} is locked by another process "
            "(local mode allows one process per directory); stop that process or give this "
            "store another connection.path"
        )
    return f"store {name} ({store.backend.value}, {_address(store)}): {exc}"


def _serve(
    cfg: GatewayConfig,
    host: str | None,
    port: int | None,
    *,
    sockets: list[socket.socket] | None = None,
) -> int:
    """One gateway process on HTTP; ``sockets``: already listening (a ``--workers`` worker)."""
    import uvicorn

    from gateway.observability.metrics import Metrics
    from gateway.runtime import Gateway
    from gateway.transports.h11_guard import uvicorn_options
    from gateway.transports.http import create_app

    bind = host or cfg.server.host
    try:
        # Checked against the address actually bound, which --host may override.
        app_auth = _preflight(cfg, bind)
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
            return runner.run(_serve_http(gateway, server, sockets))
    except KeyboardInterrupt:
        # uvicorn has already shut down gracefully; it re-raises SIGINT on the way out.
        sys.stderr.write("a2m-gateway: interrupted (Ctrl-C), stopped\n")
        return EXIT_INTERRUPTED


async def _serve_http(
    gateway: Gateway, server: uvicorn.Server, sockets: list[socket.socket] | None
) -> int:
    if not await _open_local_stores(gateway):
        return 2
    await server.serve(sockets=sockets)
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"{value} is not a TCP port: use 1-65535, or 0 for any free port"
        )
    return value


def _serve_workers(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.workers import serve_workers

    host = args.host or cfg.server.host
    port = cfg.server.port if args.port is None else args.port
    locked = [
        n
        for n, s in cfg.stores.items()
        if isinstance(s.connection, QdrantConnection) and s.connection.path is not None
    ]
    if locked:
        sys.stderr.write(
            f"a2m-gateway: --workers needs stores every process can open; {', '.join(locked)} "
            "use qdrant local mode on disk (one process per path): serve a Qdrant server "
            "(connection.url) or run one worker\n"
        )
        return 2
    try:
        return serve_workers(args.config, host, port, args.workers, cfg.server.shutdown_grace_s)
    except OSError as exc:
        sys.stderr.write(f"a2m-gateway: cannot listen on {host}:{port}: {exc.strerror}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("a2m-gateway: interrupted (Ctrl-C), stopped\n")
        return EXIT_INTERRUPTED


async def _open_local_stores(gateway: Gateway, only: str | None = None) -> bool:
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
        sys.stderr.write(f"a2m-gateway: {_start_failure(exc.name, store, exc.cause)}\n")
        return False
    return True


def _preflight(cfg: GatewayConfig, bind: str) -> Authenticator:
    """What `serve` refuses before it binds, and `check` refuses alike (one sentence each).

    Raises:
        ConfigError: serving this config on ``bind`` would expose or blind a store, or
            server.auth cannot be used.
    """
    from gateway.security.auth import check_exposure

    for warning in check_exposure(cfg, bind):
        log.warning(warning)
    return _authenticator(cfg)


def _authenticator(cfg: GatewayConfig) -> Authenticator:
    """The HTTP authenticator, built before binding so a bad JWKS file fails the start.

    Raises:
        ConfigError: server.auth cannot be used (e.g. an unreadable JWKS file).
    """
    from gateway.security.auth import Authenticator

    auth = Authenticator(cfg.server.auth)
    if auth.enabled:
        log.info("caller authentication: %s", auth.describe())
    return auth


def _hash_key(new: bool) -> int:
    """Print the config line of an API key: a new random one, or one read from stdin."""
    from gateway.security.auth import generate_api_key, hash_api_key

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
    from gateway.observability.telemetry import configure_from_env
    from gateway.runtime import Gateway
    from gateway.transports.stdio import serve_stdio

    configure_from_env()
    gateway = Gateway(cfg)
    for served in gateway.served_stores(store):
        if served.config.scope.enforced:
            # stdio carries no credential, so claim filters have nothing to read: fail closed.
            log.warning(
                "store %s is scoped by caller claims; stdio has no authenticated caller, "
                "so every read answers nothing",
                served.name,
            )
    # Only the endpoint served: another store's engine (or locked local path) is not ours.
    if not await _open_local_stores(gateway, store or gateway.default_store):
        return 2
    await gateway.start(strict=False, only=store or gateway.default_store)
    try:
        await serve_stdio(gateway.dispatcher(store))
    finally:
        await gateway.close()
    return 0


async def _mcp_stdio(cfg: GatewayConfig, store: str | None) -> int:
    from gateway.mcp.server import serve_stdio
    from gateway.observability.telemetry import configure_from_env
    from gateway.runtime import Gateway

    configure_from_env()
    gateway = Gateway(cfg)
    # With --store, only that endpoint is served: another store's engine is not ours.
    served = gateway.served_stores(store) if store else list(gateway.stores.values())
    scoped = [s.name for s in served if s.config.scope.enforced]
    if scoped:
        log.warning(
            "stores %s are scoped by caller claims; stdio has no authenticated caller, "
            "so every read of them answers nothing",
            ", ".join(scoped),
        )
    if not await _open_local_stores(gateway, store):
        return 2
    await gateway.start(strict=False, only=store)
    try:
        await serve_stdio(gateway, store)
    finally:
        await gateway.close()
    return 0


_TRANSPORT_LOGGERS = ("elastic_transport", "opensearch", "opensearchpy", "httpx", "httpcore")
"""Client libraries that log a WARNING per failed attempt; `check` reports once, itself."""


def _attempts(store: StoreConfig, exc: ConnectorError) -> str:
    """What `check` did before it failed: only what really was attempted."""
    c = store.connection
    what = "collection" if store.backend.value == "qdrant" else "index"
    if isinstance(c, QdrantConnection) and c.local:
        return f"opened {what} {store.index!r} in process"
    if not isinstance(exc, EngineUnavailable | EngineTimeout):
        # Refused by the client before a request (a malformed host), or answered by the
        # address: retries are for unreachable and busy engines only.
        return (
            f"opening {what} {store.index!r}: stopped at the first error (not one that is retried)"
        )
    return (
        f"opened {what} {store.index!r}: {1 + c.retries} attempts "
        f"(connection.retries {c.retries}), {c.timeout_ms} ms timeout each"
    )


async def _check(cfg: GatewayConfig) -> int:
    from gateway.runtime import Gateway
    from gateway.store.vectorcheck import compare_stored_vectors

    for name in _TRANSPORT_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        _preflight(cfg, cfg.server.host)  # what serve would refuse, before any engine is asked
    except ConfigError as exc:
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2
    gateway = Gateway(cfg)
    failed = 0
    try:
        for name, store in gateway.stores.items():
            out: dict[str, Any] = {
                "store": name,
                "backend": store.config.backend.value,
                "engine": _address(store.config),
            }
            created_at = store.config.mapping.created_at_warning()
            if created_at:
                log.warning("store %s: %s", name, created_at)
                out["warnings"] = [created_at]
            try:
                await store.ensure_started()
                out["describe"] = store.describe()
                if store.info is not None and store.info.indexes:
                    out["indexes"] = [
                        {
                            "field": n.field,
                            "kinds": list(n.kinds),
                            "present": n.present,
                            "purpose": n.purpose,
                            **({} if n.present else {"without": n.without}),
                        }
                        for n in store.info.indexes
                    ]
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
                out["tried"] = _attempts(store.config, exc)
                sys.stderr.write(
                    f"a2m-gateway: {_start_failure(name, store.config, exc)} "
                    f"(tried: {out['tried']})\n"
                )
            sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    finally:
        await gateway.close()
    return 1 if failed else 0


async def _recall(
    cfg: GatewayConfig, question: str, store: str | None, limit: int, as_json: bool
) -> int:
    from gateway.a2m.errors import A2MError
    from gateway.runtime import Gateway

    for name in _TRANSPORT_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    gateway = Gateway(cfg)
    try:
        dispatcher = gateway.dispatcher(store)
        for served in gateway.served_stores(store):
            if served.config.scope.enforced:
                sys.stderr.write(
                    f"a2m-gateway: store {served.name} is scoped by caller claims; "
                    "a local recall has no caller, so it answers nothing\n"
                )
        try:
            result = await dispatcher.dispatch("memory/recall", {"query": question, "limit": limit})
        except A2MError as err:  # the dispatcher maps every failure to an A2M error
            sys.stderr.write(f"a2m-gateway: recall failed: {err.message} ({int(err.code)})\n")
            return 1
    finally:
        await gateway.close()
    if as_json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        sys.stdout.write(render_recall(question, result))
    return 0


def render_recall(question: str, result: dict[str, Any], width: int = 300) -> str:
    """A recall result for a person: rank, score, title and citation, then a snippet."""
    records = result.get("records") or []
    if not records:
        return f"No record answers {question!r}.\n"
    lines: list[str] = []
    for rank, rec in enumerate(records, start=1):
        score = rec.get("score")
        title = (rec.get("metadata") or {}).get("title") or rec.get("key") or ""
        cite = rec.get("uri") or rec.get("key") or rec.get("id") or ""
        head = f"{rank}. " + (f"[{score:.2f}] " if isinstance(score, int | float) else "")
        lines.append(f"{head}{title}".rstrip())
        if cite:
            lines.append(f"   {cite}")
        content = str(rec.get("content") or "")
        first, _, rest = content.partition("\n")
        if first.strip() and str(title).endswith(first.strip()):
            content = rest  # a heading already shown in the title
        text = " ".join(content.split())
        if text:
            lines.append("   " + (text if len(text) <= width else text[: width - 1] + "…"))
        lines.append("")
    return "\n".join(lines)


_NO_CONFIG_IS_DEMO = "config YAML (default: the embedded demo store, in memory)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="a2m-gateway",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from gateway import __version__

    parser.add_argument("--version", action="version", version=f"a2m-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_serve = sub.add_parser(
        "serve",
        help="serve A2M over HTTP (default: the embedded demo)",
        description="Serve every configured store over HTTP: POST /a2m/<store>, GET / lists "
        "the endpoints. Ctrl-C stops it.",
    )
    p_serve.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    p_serve.add_argument(
        "--host",
        help="address to bind (default: server.host from the config, 127.0.0.1 when unset; "
        "beyond loopback configure server.auth)",
    )
    p_serve.add_argument(
        "--port",
        type=_port,
        help="TCP port, 1-65535, or 0 for any free port (the one bound is logged); default: "
        "server.port from the config, 8080 when unset",
    )
    p_serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="gateway processes sharing the port, each with its own engine connections and "
        "metrics (default 1; on Kubernetes keep 1 and scale replicas: docs/helm.md)",
    )
    p_stdio = sub.add_parser(
        "stdio",
        help="serve one store over stdin/stdout (for an agent that spawns the gateway)",
        description="Serve one store as newline-delimited JSON-RPC on stdin/stdout; logs go "
        "to stderr.",
    )
    p_stdio.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    p_stdio.add_argument("--store", help="store name (default: the first)")
    p_mcp = sub.add_parser(
        "mcp",
        help="serve MCP over stdin/stdout (docs/mcp.md)",
        description="Serve the stores as an MCP server (tools search, fetch, timeline) on "
        "stdin/stdout, for an MCP client that spawns the gateway.",
    )
    p_mcp.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    p_mcp.add_argument("--store", help="serve one store (default: all, chosen per call)")
    p_check = sub.add_parser(
        "check",
        help="validate config, reach engines, preview records",
        description="Validate the config, open each store's engine and print 3 mapped records "
        "per store as JSON; exit 1 when a store cannot be opened.",
    )
    p_check.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    p_recall = sub.add_parser(
        "recall",
        help="ask a store a question and print ranked, cited records",
        description="Run memory/recall once and print the ranked records with their "
        "citations (or the A2M result as JSON with --json).",
    )
    p_recall.add_argument("question", help="free-text question")
    p_recall.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    p_recall.add_argument("--store", help="store name (default: the first)")
    p_recall.add_argument(
        "--limit", type=int, default=5, help="most records to return (default: 5)"
    )
    p_recall.add_argument(
        "--json", action="store_true", help="print the memory/recall result as one JSON line"
    )
    p_hash = sub.add_parser(
        "hash-key",
        help="print sha256:<hex> of an API key read from stdin (for server.auth)",
        description="Print the hash of an API key, the `hash` of a server.auth.api_keys entry "
        "(SECURITY.md). The key is read from the first line of stdin (at least 32 characters), "
        "or with --new generated and shown once on stderr; stdout carries only the hash, so "
        "`a2m-gateway hash-key --new > key.hash` never writes the key itself.",
    )
    p_hash.add_argument(
        "--new", action="store_true", help="generate a random key (printed on stderr) instead"
    )
    args = parser.parse_args(argv)
    if args.command == "hash-key":
        return _hash_key(args.new)

    from gateway.observability.logs import configure

    try:
        cfg = _load(args.config)
    except ConfigError as exc:
        configure()
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2
    # recall prints for a person: the INFO audit line would only interleave with it.
    quiet = args.command == "recall" and cfg.server.log_level.lower() in ("debug", "info")
    configure(cfg.server.log_format, "warning" if quiet else cfg.server.log_level)
    try:
        return _run(args, cfg)
    except MissingExtra as exc:
        sys.stderr.write(f"a2m-gateway: {exc}\n")
        return 2


def _run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    if args.command == "serve":
        if args.workers > 1:
            return _serve_workers(args, cfg)
        return _serve(cfg, args.host, args.port)
    store = getattr(args, "store", None)
    if store is not None and store not in cfg.stores and store not in cfg.federations:
        sys.stderr.write(f"a2m-gateway: no store named {store!r} in the config\n")
        return 2
    if args.command == "stdio":
        return asyncio.run(_stdio(cfg, args.store))
    if args.command == "recall":
        if args.limit < 1:
            sys.stderr.write("a2m-gateway: --limit must be at least 1\n")
            return 2
        return asyncio.run(_recall(cfg, args.question, args.store, args.limit, args.json))
    if args.command == "mcp":
        return asyncio.run(_mcp_stdio(cfg, args.store))
    return asyncio.run(_check(cfg))


if __name__ == "__main__":
    raise SystemExit(main())
