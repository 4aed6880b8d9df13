"""The route one call takes through the project: which modules run, and the hops between them.

One warm-up call, then one profiled call of the same kind through the HTTP app
(in process, no socket) with a profile hook on every thread. A module counts when
any of its functions runs; a hop is a call from a function of one project module
into another's (the caller is the nearest project frame on the stack, so a
callback through asyncio or a library counts against the module that passed it).

    python -m bench.route [--call recall|mcp-search] [--config FILE] [--store NAME]
                          [--query TEXT] [--list]

Default: a hybrid ``memory/recall`` on the embedded demo (lexical when the
``minilm`` extra is absent: the output says which).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "connectors")


def project_module(filename: str) -> str | None:
    """`gateway/store/store.py` for a file of the project's packages, else None."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts and rel.parts[0] in PACKAGES else None


@dataclass
class Route:
    """What ran: project modules by calls into them, and hops by (caller, callee) module."""

    calls: Counter[str] = field(default_factory=Counter)
    hops: Counter[tuple[str, str]] = field(default_factory=Counter)
    _modules: dict[str, str | None] = field(default_factory=dict)

    def _module(self, frame: FrameType) -> str | None:
        filename = frame.f_code.co_filename
        if filename not in self._modules:
            self._modules[filename] = project_module(filename)
        return self._modules[filename]

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = self._module(frame)
        if callee is None:
            return
        self.calls[callee] += 1
        back = frame.f_back
        while back is not None:
            caller = self._module(back)
            if caller is not None:
                if caller != callee:
                    self.hops[(caller, callee)] += 1
                return
            back = back.f_back

    @property
    def modules(self) -> list[str]:
        return sorted(self.calls)


class Profiled:
    """`route.hook` on this thread and every thread started meanwhile, while inside."""

    def __init__(self, route: Route) -> None:
        self._route = route

    def __enter__(self) -> None:
        threading.setprofile(self._route.hook)
        sys.setprofile(self._route.hook)

    def __exit__(self, *_: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


def _body(call: str, query: str) -> dict[str, Any]:
    if call == "mcp-search":
        return {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": query, "limit": 5}},
        }
    params: dict[str, Any] = {"query": query, "limit": 5}
    return {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": params}


async def _session(app: Any, path: str, headers: dict[str, str]) -> dict[str, str]:
    """MCP's initialize handshake; the headers later calls carry."""
    import httpx

    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 123))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench.route", "version": "0"},
            },
        }
        reply = await client.post(path, json=init, headers=headers)
        reply.raise_for_status()
        out = dict(headers)
        if "mcp-session-id" in reply.headers:
            out["mcp-session-id"] = reply.headers["mcp-session-id"]
        out["mcp-protocol-version"] = "2025-06-18"
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await client.post(path, json=note, headers=out)
        return out


async def trace(config_path: str | None, store: str | None, call: str, query: str) -> Route:
    import httpx

    from gateway.config import load_config
    from gateway.demo import default_demo_config
    from gateway.observability.metrics import Metrics
    from gateway.runtime import Gateway
    from gateway.transports.http import create_app

    config = load_config(config_path) if config_path else default_demo_config(None)
    gateway = Gateway(config)
    app = create_app(gateway, config.server, Metrics())
    name = store or gateway.default_store
    mcp = call == "mcp-search"
    path = f"/mcp/{name}" if mcp else f"/a2m/{name}"
    headers = {"accept": "application/json, text/event-stream"} if mcp else {}
    route = Route()
    async with app.router.lifespan_context(app):
        await gateway.open_local_stores()
        if mcp:
            headers = await _session(app, path, headers)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 123))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", timeout=60
        ) as client:
            body = _body(call, query)
            for _ in range(2):  # warm: first-call imports and caches are not the route
                (await client.post(path, json=body, headers=headers)).raise_for_status()
            with Profiled(route):
                reply = await client.post(path, json=body, headers=headers)
            reply.raise_for_status()
            if '"result"' not in reply.text:
                raise SystemExit(f"the profiled call failed: {reply.text[:300]}")
    return route


def report(route: Route, listing: bool) -> str:
    lines = [
        f"project modules: {len(route.calls)}",
        f"module-to-module hops: {sum(route.hops.values())} calls over {len(route.hops)} edges",
    ]
    if listing:
        lines.append("modules (calls into each):")
        lines += [f"  {calls:6d}  {name}" for name, calls in sorted(route.calls.items())]
        lines.append("hops (calls from one module into another):")
        lines += [f"  {n:6d}  {a} -> {b}" for (a, b), n in sorted(route.hops.items())]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--call", choices=("recall", "mcp-search"), default="recall")
    parser.add_argument("--config", help="a gateway config (default: the embedded demo)")
    parser.add_argument("--store", help="the store to call (default: the config's first)")
    parser.add_argument("--query", default="how does recall rank records by relevance")
    parser.add_argument("--list", action="store_true", help="name every module on the route")
    args = parser.parse_args()
    route = asyncio.run(trace(args.config, args.store, args.call, args.query))
    print(report(route, args.list))


if __name__ == "__main__":
    main()
