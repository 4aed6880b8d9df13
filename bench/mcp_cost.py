"""What an MCP tool call costs beside the A2M recall it makes, in one process, no engine.

The HTTP app is driven in this process through raw ASGI messages (no HTTP
client, no socket, no server), and the store's connector is a stub answering
ten SciFact documents, title and text, as an OpenSearch store would map them.
So the process's CPU time is the gateway's own work on each side: the A2M door
(admission, JSON-RPC, dispatcher, front, store, mapping, the wire result) and
the MCP door (the same admission and dispatch, plus the MCP request handling,
the SDK's or the one-step path's, and the tool's rendering). The engine client and the HTTP server,
the same on both sides, are what ``python -m bench.latency`` adds. Rounds
alternate the two ways so a shared machine's drift hits both alike.

    python -m bench.mcp_cost [--requests 2000] [--rounds 5] [--profile]

``--profile`` runs cProfile over one more block of MCP calls and prints the
CPU by package (the innermost frame's) and the costliest functions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from bench import machine
from bench.inprocess import StubConnector, post
from bench.latency.workload import MCP_VERSION, MODERN_HEADERS
from bench.quality.collection import SCIFACT
from connectors.base import Hit, SearchRequest
from gateway.config import parse_config
from gateway.observability.metrics import Metrics
from gateway.runtime import Gateway
from gateway.transports.http import create_app
from tests.support.scifact import load_scifact

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 10
QUERY = "vitamin D deficiency and bone density"


def _hits(scifact_dir: Path) -> list[Hit]:
    sf = load_scifact(scifact_dir)
    out = []
    for rank, doc_id in enumerate(sf.corpus_ids[:LIMIT]):
        source = {"title": sf.titles[doc_id], "text": sf.texts[doc_id], "key": doc_id}
        out.append(Hit(doc_id, source, 1.0 - rank / 100))
    return out


def _gateway(hits: list[Hit]) -> Gateway:
    store = {
        "backend": "opensearch",
        "index": "bench-mcp-cost",
        "connection": {"hosts": ["http://127.0.0.1:9"]},  # never contacted: the stub answers
        "mapping": {"content": "text", "key": "key", "metadata": ["title"]},
        "search": {"mode": "lexical", "text_fields": ["title", "text"]},
    }
    gateway = Gateway(parse_config({"stores": {"s": store}}))

    async def search(request: SearchRequest) -> list[Hit]:
        return [Hit(h.id, dict(h.source), h.score) for h in hits[: request.limit]]

    gateway.stores["s"].connector = StubConnector(search)
    return gateway


WAYS: dict[str, tuple[str, dict[str, str], bytes]] = {
    "a2m": (
        "/a2m/s",
        {},
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "memory/recall",
                "params": {"query": QUERY, "limit": LIMIT},
            }
        ),
    ),
    "mcp": (
        "/mcp/s",
        {**MODERN_HEADERS, "accept": "application/json, text/event-stream"},
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "search",
                    "arguments": {"query": QUERY, "limit": LIMIT},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            }
        ),
    ),
}
"""Each way's path, extra headers and body: one A2M recall, one MCP search tool call."""


async def _call(app: Any, path: str, headers: dict[str, str], body: bytes) -> bytes:
    status, answer = await post(app, path, body, headers)
    if status != 200:
        raise SystemExit(f"{path} answered HTTP {status}: {answer[:300]!r}")
    return answer


async def _block(app: Any, way: str, n: int) -> float:
    """CPU milliseconds per call over ``n`` calls of `way`."""
    path, headers, body = WAYS[way]
    start = time.process_time()
    for _ in range(n):
        await _call(app, path, headers, body)
    return 1000 * (time.process_time() - start) / n


def _check(answers: dict[str, bytes]) -> None:
    """Both ways answered the same ten records (a tool error would cost less)."""
    records = orjson.loads(answers["a2m"])["result"]["records"]
    tool = orjson.loads(answers["mcp"])["result"]
    if tool.get("isError") or len(tool["structuredContent"]["results"]) != len(records):
        raise SystemExit(f"the MCP call did not answer the recall's records: {tool}")


def _by_package(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Self CPU by package of the frame (the project's by subpackage)."""
    totals: Counter[str] = Counter()
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, _, _), (_, _, tottime, _, _) in raw.items():
        totals[_package(filename)] += tottime
    whole = sum(totals.values()) or 1.0
    return [(name, 100 * t / whole) for name, t in totals.most_common(15)]


def _package(filename: str) -> str:
    path = Path(filename)
    if "site-packages" in path.parts:
        rest = path.parts[path.parts.index("site-packages") + 1 :]
        return rest[0].removesuffix(".py") if rest else "site-packages"
    if filename == "~":
        return "builtins (C)"
    try:
        parts = path.resolve().relative_to(ROOT).parts
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    except ValueError:
        return f"stdlib {path.stem}" if "python3" in filename else path.name


def _cumulative(stats: pstats.Stats, file_part: str, function: str) -> float:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    return float(
        sum(v[3] for (f, _, name), v in raw.items() if name == function and f.endswith(file_part))
    )


def _door_share(stats: pstats.Stats) -> float:
    """The share of the profiled time in the MCP door but outside the tool it calls:
    admission, the envelope, and the SDK's request handling or the one-step path."""
    total: float = stats.total_tt  # type: ignore[attr-defined]
    door = _cumulative(stats, "gateway/mcp/server.py", "__call__")
    tool = _cumulative(stats, "gateway/mcp/tools.py", "call")
    return (door - tool) / total if total else 0.0


async def main(args: argparse.Namespace) -> None:
    gateway = _gateway(_hits(args.scifact))
    app = create_app(gateway, gateway.config.server, Metrics())
    cpu: dict[str, list[float]] = {way: [] for way in WAYS}
    load_before = machine.load_text()
    async with app.router.lifespan_context(app):
        _check({way: await _call(app, *WAYS[way]) for way in WAYS})
        for way in WAYS:
            await _block(app, way, args.warmup)
        for _ in range(args.rounds):
            for way in WAYS:
                cpu[way].append(await _block(app, way, args.requests))
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            await _block(app, "mcp", args.requests)
            profile.disable()
    a2m = statistics.median(cpu["a2m"])
    print("| way | CPU ms per call (median) | min-max over rounds | vs A2M |")
    print("| --- | ---: | --- | ---: |")
    for way, values in cpu.items():
        mid = statistics.median(values)
        print(
            f"| {way} | {mid:.3f} | {min(values):.3f}-{max(values):.3f} "
            f"| {mid / a2m:.2f}x (+{mid - a2m:.3f} ms) |"
        )
    print(
        f"{args.rounds} rounds x {args.requests} calls per way, {LIMIT} records each; "
        f"{machine.this_machine().describe()}; "
        f"load average {load_before} before, {machine.load_text()} after."
    )
    if args.profile:
        stats = pstats.Stats(profile)
        mcp = statistics.median(cpu["mcp"])
        share = _door_share(stats)
        print(
            f"\nThe MCP door's own work (its ASGI app less the tool it calls): "
            f"{100 * share:.0f} % of an MCP call, about {share * mcp:.3f} ms"
        )
        print("\nMCP calls, self CPU by package (cProfile, which inflates call-heavy code):")
        for name, pkg_share in _by_package(stats):
            print(f"  {pkg_share:5.1f}%  {name}")
        print()
        stats.sort_stats("tottime").print_stats(25)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.mcp_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--requests", "-n", type=int, default=2000, help="calls per way and round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--profile", action="store_true", help="cProfile one more block of MCP calls")
    p.add_argument("--scifact", type=Path, default=SCIFACT)
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_parse()))
