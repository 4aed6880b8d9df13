"""a2m-gateway: a read-only A2M 0.1 (Agent-to-Memory) server in front of the search indexes
you already run (Elasticsearch, OpenSearch, Qdrant).

Agents call memory/describe, memory/recall, memory/timeline and memory/fetch over HTTP
(`serve`, which also serves MCP at /mcp) or stdin/stdout (`stdio`, and `mcp` for MCP
clients); writes answer READ_ONLY. Without --config every command uses the embedded
demo store: the gateway's own documentation, indexed in memory at start, nothing
downloaded.

  a2m-gateway serve                          # the demo on http://127.0.0.1:8080
  a2m-gateway recall "how are scores normalised?"
  a2m-gateway check --config my.yaml         # reach each engine, preview 3 mapped records
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import logging
import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    from gateway.config import GatewayConfig

    # argparse exposes no public name for the object add_subparsers returns.
    _Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

log = logging.getLogger("a2m.cli")


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
    from gateway.serve import EXIT_INTERRUPTED, cannot_listen
    from gateway.workers import serve_workers

    host = args.host or cfg.server.host
    port = cfg.server.port if args.port is None else args.port
    reasons = {n: s.connection.one_process_only() for n, s in cfg.stores.items()}
    locked = {n: why for n, why in reasons.items() if why is not None}
    if locked:
        sys.stderr.write(
            f"a2m-gateway: --workers needs stores every process can open; {', '.join(locked)} "
            f"{next(iter(locked.values()))}\n"
        )
        return 2
    try:
        return serve_workers(args.config, host, port, args.workers, cfg.server.shutdown_grace_s)
    except OSError as exc:
        sys.stderr.write(f"a2m-gateway: {cannot_listen(host, port, exc)}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("a2m-gateway: interrupted (Ctrl-C), stopped\n")
        return EXIT_INTERRUPTED


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
    from gateway.serve import open_local_stores
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
    if not await open_local_stores(gateway, store or gateway.default_store):
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
    from gateway.serve import open_local_stores

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
    if not await open_local_stores(gateway, store):
        return 2
    await gateway.start(strict=False, only=store)
    try:
        await serve_stdio(gateway, store)
    finally:
        await gateway.close()
    return 0


_NO_CONFIG_IS_DEMO = "config YAML (default: the embedded demo store, in memory)"


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each command's own."""
    parser = argparse.ArgumentParser(
        prog="a2m-gateway",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from gateway import __version__

    parser.add_argument("--version", action="version", version=f"a2m-gateway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = {}
    for add in (_add_serve, _add_stdio, _add_mcp, _add_check, _add_recall, _add_hash_key):
        command = add(sub)
        commands[command.prog.split()[-1]] = command
    return parser, commands


def _add_serve(sub: _Commands) -> argparse.ArgumentParser:
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
    return p_serve


def _add_stdio(sub: _Commands) -> argparse.ArgumentParser:
    p_stdio = sub.add_parser(
        "stdio",
        help="serve one store over stdin/stdout (for an agent that spawns the gateway)",
        description="Serve one store as newline-delimited JSON-RPC on stdin/stdout; logs go "
        "to stderr.",
    )
    p_stdio.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    p_stdio.add_argument("--store", help="store name (default: the first)")
    return p_stdio


def _add_mcp(sub: _Commands) -> argparse.ArgumentParser:
    p_mcp = sub.add_parser(
        "mcp",
        help="serve MCP over stdin/stdout (docs/mcp.md)",
        description="Serve the stores as an MCP server (tools search, fetch, timeline) on "
        "stdin/stdout, for an MCP client that spawns the gateway.",
    )
    p_mcp.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    p_mcp.add_argument("--store", help="serve one store (default: all, chosen per call)")
    return p_mcp


def _add_check(sub: _Commands) -> argparse.ArgumentParser:
    p_check = sub.add_parser(
        "check",
        help="validate config, reach engines, preview records",
        description="Validate the config, open each store's engine and print 3 mapped records "
        "per store as JSON; exit 1 when a store cannot be opened.",
    )
    p_check.add_argument("--config", help=_NO_CONFIG_IS_DEMO)
    return p_check


def _add_recall(sub: _Commands) -> argparse.ArgumentParser:
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
        "--limit",
        type=int,
        default=5,
        help="most records to return (default: 5; 0: as many as the store allows)",
    )
    p_recall.add_argument(
        "--where",
        action="append",
        metavar="KEY=VALUE",
        help="only records whose KEY equals VALUE (repeat for several keys, ANDed; a key "
        "given twice matches either value); a key the store cannot test matches nothing, "
        "and stderr says so",
    )
    p_recall.add_argument(
        "--json", action="store_true", help="print the memory/recall result as one JSON line"
    )
    return p_recall


def _add_hash_key(sub: _Commands) -> argparse.ArgumentParser:
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
    return p_hash


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line, or exit 2: bare `a2m-gateway` prints the help, a misspelt option
    gets the nearest one ("did you mean --port?")."""
    parser, commands = _parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser.print_help()
        raise SystemExit(2)
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = commands[args.command]
        options = re.findall(r"--?[\w-]+", command.format_usage())
        hints = [_nearest(word, options) for word in extras if word.startswith("-")]
        hint = "; ".join(h for h in hints if h)
        command.error(
            f"unrecognized arguments: {' '.join(extras)}" + (f" ({hint})" if hint else "")
        )
    return args


def _nearest(word: str, options: list[str]) -> str | None:
    near = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
    return f"did you mean {near[0]}?" if near else None


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # The gateway uses no pydantic plugin, and looking for one reads the metadata of every
    # installed distribution (a fifth of a second at start); an operator's own setting wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if args.command == "hash-key":
        return _hash_key(args.new)

    from gateway.config import ConfigError
    from gateway.embedders.base import MissingExtra
    from gateway.observability.logs import configure
    from gateway.serve import load

    try:
        cfg = load(args.config)
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
        from gateway.serve import serve_http

        return serve_http(cfg, args.host, args.port)
    store = getattr(args, "store", None)
    if store is not None and store not in cfg.stores and store not in cfg.federations:
        sys.stderr.write(f"a2m-gateway: no store named {store!r} in the config\n")
        return 2
    if args.command == "stdio":
        return asyncio.run(_stdio(cfg, args.store))
    if args.command == "recall":
        from gateway.recall import parse_where, recall

        try:
            where = parse_where(args.where)
        except ValueError as exc:
            sys.stderr.write(f"a2m-gateway: {exc}\n")
            return 2
        return asyncio.run(recall(cfg, args.question, args.store, args.limit, args.json, where))
    if args.command == "mcp":
        return asyncio.run(_mcp_stdio(cfg, args.store))
    from gateway.check import check

    return asyncio.run(check(cfg))


if __name__ == "__main__":
    raise SystemExit(main())
