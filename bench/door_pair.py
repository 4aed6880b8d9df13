"""An MCP tool call against the A2M recall it makes: gateway CPU per call, interleaved.

``python -m bench.latency`` times each way in blocks of hundreds of calls. On a shared
2-core machine the load drifts from one block to the next by more than the two doors
differ, so its MCP / A2M ratio moves by tenths between runs of the same code. Here both
ways go to the same ``a2m-gateway serve``, over connections kept open, in short slices
that alternate (the order reversed every other slice); the gateway's CPU (user +
system, /proc) is summed per way over its slices, so drift falls on both alike. The
ratio is that of the sums, with a bootstrap interval over the slices.

``--root DIR`` adds a gateway run from another checkout (e.g. a pinned main), its
slices interleaved with this tree's, so a before / after pair shares the same minutes.

    python -m bench.door_pair --opensearch-url URL [--concurrency 1 32] [--slices 40]
                              [--per-slice 200] [--root DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import yaml

from bench import machine
from bench.latency import peer as peer_mod
from bench.latency.harness import (
    JSON_HEADERS,
    MCP_HEADERS,
    MODERN_HEADERS,
    Item,
    mcp_search,
    recall_call,
    recall_ok,
    store_config,
    workload,
)
from bench.process import GatewayProcess, start_gateway, stop_server
from bench.quality.collection import load_split
from bench.quality.harness import SCIFACT
from tests.support import lucene_loader

WAYS = ("a2m", "mcp")


@dataclass
class Tally:
    """One gateway at one concurrency: CPU seconds and calls per slice, per way."""

    cpu: dict[str, list[float]] = field(default_factory=lambda: {w: [] for w in WAYS})
    calls: dict[str, list[int]] = field(default_factory=lambda: {w: [] for w in WAYS})

    def per_call_ms(self, way: str, picks: Sequence[int] | None = None) -> float:
        idx = range(len(self.cpu[way])) if picks is None else picks
        return 1000 * sum(self.cpu[way][i] for i in idx) / sum(self.calls[way][i] for i in idx)

    def ratio(self, picks: Sequence[int] | None = None) -> float:
        """MCP / A2M CPU per call; NaN when the A2M slices took no /proc tick at all."""
        a2m = self.per_call_ms("a2m", picks)
        return self.per_call_ms("mcp", picks) / a2m if a2m > 0 else math.nan

    def interval(self, rng: random.Random, draws: int = 2000) -> tuple[float, float]:
        """The 2.5th and 97.5th percentiles of the ratio over slices drawn with replacement."""
        n = len(self.cpu["a2m"])
        drawn = (self.ratio([rng.randrange(n) for _ in range(n)]) for _ in range(draws))
        ratios = sorted(r for r in drawn if math.isfinite(r))
        if not ratios:
            return math.nan, math.nan
        return ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios)) - 1]


class Door:
    """One gateway's two doors, each over a session of its own kept open across slices."""

    def __init__(self, base_url: str, pid: int, concurrency: int) -> None:
        self.pid = pid
        self._urls = {"a2m": f"{base_url}/a2m/opensearch", "mcp": f"{base_url}/mcp/opensearch"}
        self._headers = {"a2m": JSON_HEADERS, "mcp": {**MCP_HEADERS, **MODERN_HEADERS}}
        self._sessions = {
            w: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
            for w in WAYS
        }
        self._concurrency = concurrency

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()

    async def slice(self, way: str, items: Sequence[Item], first_id: int) -> float:
        """Send `items` with the concurrency's workers; the gateway's CPU seconds meanwhile."""
        session, url, headers = self._sessions[way], self._urls[way], self._headers[way]
        queue = list(enumerate(items, first_id))

        async def worker() -> None:
            while queue:
                i, item = queue.pop()
                body = mcp_search(item, i) if way == "mcp" else recall_call(item, i)
                async with session.post(url, data=body, headers=headers) as r:
                    raw = await r.read()
                ok = peer_mod.answer_ok(raw) if way == "mcp" else recall_ok(raw)
                if r.status != 200 or not ok:
                    raise RuntimeError(f"{way} call failed: {r.status} {raw[:200]!r}")

        before = machine.cpu_seconds(self.pid)
        await asyncio.gather(*(worker() for _ in range(self._concurrency)))
        after = machine.cpu_seconds(self.pid)
        if before is None or after is None:
            raise SystemExit("the gateway's CPU time is read from /proc: Linux only")
        return after - before


async def measure(
    gateways: dict[str, GatewayProcess], items: Sequence[Item], args: argparse.Namespace, c: int
) -> dict[str, Tally]:
    doors = {name: Door(g.base_url, g.proc.pid, c) for name, g in gateways.items()}
    tallies = {name: Tally() for name in gateways}
    per = args.per_slice
    try:
        for door in doors.values():  # warm both doors of every gateway
            for way in WAYS:
                await door.slice(way, items[:per], 0)
        order = [(name, way) for name in doors for way in WAYS]
        for s in range(args.slices):
            chunk = [items[(s * per + k) % len(items)] for k in range(per)]
            for name, way in order if s % 2 == 0 else reversed(order):
                cpu = await doors[name].slice(way, chunk, s * per)
                tallies[name].cpu[way].append(cpu)
                tallies[name].calls[way].append(per)
    finally:
        for door in doors.values():
            await door.close()
    return tallies


def report(results: dict[int, dict[str, Tally]], args: argparse.Namespace, load: str) -> str:
    rng = random.Random(args.seed)
    lines = [
        "| gateway | concurrency | A2M recall CPU ms/call | MCP search CPU ms/call "
        "| MCP / A2M | 95 % interval |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for c, tallies in results.items():
        for name, t in tallies.items():
            low, high = t.interval(rng)
            lines.append(
                f"| {name} | {c} | {t.per_call_ms('a2m'):.3f} | {t.per_call_ms('mcp'):.3f} "
                f"| {t.ratio():.2f} | {low:.2f}-{high:.2f} |"
            )
    lines.append("")
    lines.append(
        f"{args.slices} slices x {args.per_slice} calls per way, gateway and concurrency "
        f"(BM25, limit 10, SciFact train queries). Run {time.strftime('%Y-%m-%d %H:%M %Z')} "
        f"on {machine.this_machine().describe()}; load average {load}."
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    if not args.opensearch_url:
        raise SystemExit("no OpenSearch URL: pass --opensearch-url or set A2M_TEST_OPENSEARCH_URL")
    split = load_split(
        SCIFACT / "corpus.jsonl", SCIFACT / "queries-train.jsonl", SCIFACT / "qrels" / "train.tsv"
    )
    index = args.index or f"a2m-bench-{split.fingerprint()}-{len(split.sf.corpus_ids)}"
    lucene_loader.load_index("opensearch", args.opensearch_url, index, split.sf)
    items = workload(split, max(args.per_slice * args.slices, 1), 0.0, args.seed)
    load_before = machine.load_text()
    with tempfile.TemporaryDirectory(prefix="a2m-door-pair-") as tmp:
        work = Path(tmp)
        config = {
            "server": {"name": "a2m-bench"},
            "stores": {"opensearch": store_config("opensearch", args.opensearch_url, index)},
        }
        path = work / "gateway.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        pinned = os.environ.get("A2M_BENCH_GATEWAY_ROOT")
        roots = {f"root {pinned}" if pinned else "this tree": None}
        roots.update({f"root {r}": r for r in args.root})
        gateways: dict[str, GatewayProcess] = {}
        try:
            for i, (name, root) in enumerate(roots.items()):
                gateways[name] = start_gateway(
                    path, work / f"data{i}", work / f"gw{i}.log", root=root
                )
            results = {c: asyncio.run(measure(gateways, items, args, c)) for c in args.concurrency}
        finally:
            for g in gateways.values():
                stop_server(g.proc)
    if args.out:
        Path(args.out).write_text(json.dumps(as_json(results), indent=1))
    return report(results, args, f"{load_before} before, {machine.load_text()} after")


def as_json(results: dict[int, dict[str, Tally]]) -> dict[str, object]:
    """One row per gateway and concurrency: each slice's CPU seconds and calls, per way."""
    rows = [
        {"gateway": name, "concurrency": c, "cpu_s": t.cpu, "calls": t.calls, "ratio": t.ratio()}
        for c, tallies in results.items()
        for name, t in tallies.items()
    ]
    return {"rows": rows}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.door_pair", description=__doc__.split("\n")[0]
    )
    p.add_argument("--opensearch-url", default=os.environ.get("A2M_TEST_OPENSEARCH_URL"))
    p.add_argument("--concurrency", nargs="+", type=int, default=[1, 32])
    p.add_argument("--slices", type=int, default=40, help="slices per way, gateway and concurrency")
    p.add_argument("--per-slice", type=int, default=200, help="calls per slice")
    p.add_argument(
        "--root", action="append", default=[], help="also a gateway run from this checkout"
    )
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--index", help="index name (default: the quality benchmark's)")
    p.add_argument("--out", help="write every slice's figures as JSON here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    print(run(parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
