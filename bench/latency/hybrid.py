"""What a hybrid recall costs next to a lexical one, through a real gateway, on one engine.

Both modes go to the same store of a ``serve`` process: lexical sends SciFact
train query text, hybrid the same text plus its MiniLM vector (``limit`` 10).
Blocks alternate lexical / hybrid at each concurrency, round after round, so
drift in a shared machine's load hits both alike. Per block: p50, throughput,
and CPU milliseconds per request of the engine and of the gateway, read from
/proc. The engine's figure is honest only on a node no one else uses: start a
private one (``A2M_ENGINES_HOME=/tmp/x python tests/engines/engines.py start
--only opensearch``) and pass its URL. Engine round trips per call are counted
by a recording proxy in front of the node, on a second store, outside the
timed blocks.

    python -m bench.latency.hybrid --engine opensearch --url http://127.0.0.1:PORT
    python -m bench.latency.hybrid --engine elasticsearch --url ... --candidates 30
    A2M_BENCH_GATEWAY_ROOT=/tmp/main-tree python -m bench.latency.hybrid ...   # before
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
import yaml

from bench import machine
from bench.latency.report import percentile
from bench.latency.workload import JSON_HEADERS, store_config
from bench.process import start_gateway, stop_server
from bench.quality.collection import SCIFACT, load_split
from tests.support import lucene_loader
from tests.support.recording_proxy import recording_proxy

LIMIT = 10
MODES = ("lexical", "hybrid")


@dataclass
class Block:
    mode: str
    concurrency: int
    latencies_s: list[float]
    wall_s: float
    errors: int
    load: float
    cpu_ms: dict[str, float] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        return len(self.latencies_s) / self.wall_s if self.wall_s else 0.0


def _params(mode: str, text: str, vector: list[float]) -> dict[str, Any]:
    if mode == "lexical":
        return {"query": text, "limit": LIMIT}
    return {"query": text, "embedding": vector, "limit": LIMIT}


def _bodies(mode: str, items: Sequence[tuple[str, list[float]]]) -> list[bytes]:
    return [
        orjson.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "memory/recall", "params": _params(mode, *it)}
        )
        for i, it in enumerate(items)
    ]


async def _drive(
    url: str, bodies: Sequence[bytes], concurrency: int
) -> tuple[list[float], float, int]:
    latencies: list[float] = []
    errors = 0
    queue = list(reversed(bodies))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def worker() -> None:
            nonlocal errors
            while queue:
                body = queue.pop()
                start = time.perf_counter()
                async with http.post(url, data=body, headers=JSON_HEADERS) as r:
                    answer = await r.read()
                latencies.append(time.perf_counter() - start)
                if r.status != 200 or b'"error"' in answer:
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - start, errors


def node_pid(url: str) -> int | None:
    """The node's pid: from /_nodes/_local (the node must run on this machine)."""
    r = httpx.get(f"{url}/_nodes/_local/process", timeout=10)
    r.raise_for_status()
    nodes = r.json().get("nodes", {})
    for node in nodes.values():
        pid = node.get("process", {}).get("id")
        if isinstance(pid, int) and Path(f"/proc/{pid}").exists():
            return pid
    return None


def _round_trips(
    base: str, items: Sequence[tuple[str, list[float]]], seen: list[Any]
) -> dict[str, float]:
    out: dict[str, float] = {}
    for mode in MODES:
        bodies = _bodies(mode, items)
        seen.clear()
        for body in bodies:
            r = httpx.post(f"{base}/a2m/counted", content=body, headers=JSON_HEADERS, timeout=60)
            r.raise_for_status()
        out[mode] = len(seen) / len(bodies)
    return out


def gateway_config(args: argparse.Namespace, index: str, proxy_url: str) -> dict[str, Any]:
    """Store ``s`` on the node, and ``counted`` on the same index through the recording proxy."""
    store = store_config(args.engine, args.url, index)
    counted = store_config(args.engine, proxy_url, index)
    if args.candidates is not None:
        store["search"]["candidates"] = args.candidates
        counted["search"]["candidates"] = args.candidates
    return {
        "server": {"name": "a2m-bench", "log_level": "warning"},
        "stores": {"s": store, "counted": counted},
    }


def measure(
    url: str,
    mode: str,
    concurrency: int,
    warm: Sequence[tuple[str, list[float]]],
    timed: Sequence[tuple[str, list[float]]],
    pids: dict[str, int],
) -> Block:
    """One block: the warm-up calls, then the timed ones with each process's CPU per call."""
    asyncio.run(_drive(url, _bodies(mode, warm), concurrency))
    before = {k: machine.cpu_seconds(p) for k, p in pids.items()}
    load = machine.load_average()[0]
    lat, wall, errors = asyncio.run(_drive(url, _bodies(mode, timed), concurrency))
    block = Block(mode, concurrency, lat, wall, errors, load)
    for k, p in pids.items():
        now, then = machine.cpu_seconds(p), before[k]
        if now is not None and then is not None:
            block.cpu_ms[k] = 1000 * (now - then) / len(lat)
    return block


def run(args: argparse.Namespace) -> str:
    split = load_split(Path(args.corpus), Path(args.queries), Path(args.qrels))
    index = args.index or f"a2m-bench-{split.fingerprint()}-{len(split.sf.corpus_ids)}"
    lucene_loader.load_index(args.engine, args.url, index, split.sf)
    rng = random.Random(args.seed)
    qids = list(split.query_ids)
    pick = [rng.choice(qids) for _ in range(args.requests + args.warmup)]
    items = [(split.sf.queries[q], split.sf.query_vector(q)) for q in pick]
    warm, timed = items[: args.warmup], items[args.warmup :]
    engine_pid = node_pid(args.url)
    load_before = machine.load_text()
    blocks: list[Block] = []
    with (
        tempfile.TemporaryDirectory(prefix="a2m-hybrid-") as tmp,
        recording_proxy(args.url) as (
            proxy_url,
            seen,
        ),
    ):
        work = Path(tmp)
        config = gateway_config(args, index, proxy_url)
        (work / "gateway.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        gateway = start_gateway(work / "gateway.yaml", work / "data", work / "gateway.log")
        try:
            trips = _round_trips(gateway.base_url, timed[:20], seen)
            pids = {"gateway": gateway.proc.pid}
            if engine_pid is not None:
                pids["engine"] = engine_pid
            url = f"{gateway.base_url}/a2m/s"
            for rnd in range(args.rounds):
                for c in args.concurrency:
                    for mode in MODES if rnd % 2 == 0 else tuple(reversed(MODES)):
                        block = measure(url, mode, c, warm, timed, pids)
                        blocks.append(block)
                        print(
                            f"round {rnd} c={c:<3d} {mode:8s} "
                            f"p50 {percentile(block.latencies_s, 50):6.2f} ms "
                            f"{block.throughput:7.1f} req/s engine "
                            f"{block.cpu_ms.get('engine', float('nan')):.2f} ms CPU/req "
                            f"errors {block.errors} load {block.load:.2f}",
                            file=sys.stderr,
                        )
        finally:
            stop_server(gateway.proc)
    if args.out:
        raw = [b.__dict__ for b in blocks]
        Path(args.out).write_text(json.dumps({"round_trips": trips, "blocks": raw}) + "\n")
    return markdown(args, blocks, trips, load_before, machine.load_text())


def _median(blocks: Sequence[Block], f: Any) -> float:
    values = [f(b) for b in blocks]
    return statistics.median(values) if values else float("nan")


def markdown(
    args: argparse.Namespace,
    blocks: Sequence[Block],
    trips: dict[str, float],
    load_before: str,
    load_after: str,
) -> str:
    """Medians over rounds per mode and concurrency, with hybrid / lexical ratios."""
    lines = [
        "| engine | candidates | mode | c | p50 ms | req/s | engine CPU ms/req | "
        "gateway CPU ms/req | round trips/call | errors |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios: list[str] = []
    for c in args.concurrency:
        cells: dict[str, tuple[float, float, float, float]] = {}
        for mode in MODES:
            bs = [b for b in blocks if b.mode == mode and b.concurrency == c]
            p50 = _median(bs, lambda b: percentile(b.latencies_s, 50))
            tput = _median(bs, lambda b: b.throughput)
            eng = _median(bs, lambda b: b.cpu_ms.get("engine", float("nan")))
            gw = _median(bs, lambda b: b.cpu_ms.get("gateway", float("nan")))
            cells[mode] = (p50, tput, eng, gw)
            lines.append(
                f"| {args.engine} | {args.candidates or 'unset'} | {mode} | {c} | {p50:.2f} | "
                f"{tput:.0f} | "
                f"{eng:.2f} | {gw:.2f} | {trips[mode]:.2f} | {sum(b.errors for b in bs)} |"
            )
        h, lx = cells["hybrid"], cells["lexical"]
        ratios.append(
            f"c={c}: engine CPU {h[2] / lx[2]:.2f}x, p50 {h[0] / lx[0]:.2f}x, "
            f"throughput {h[1] / lx[1]:.2f}x"
        )
    lines += [
        "",
        f"hybrid / lexical: {'; '.join(ratios)}. {args.requests} requests per block, "
        f"{args.rounds} rounds, limit {LIMIT}; load average (1/5/15 min) {load_before} "
        f"before, {load_after} after.",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.latency.hybrid",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--engine", choices=["opensearch", "elasticsearch"], required=True)
    p.add_argument("--url", help="the node (default: A2M_TEST_<ENGINE>_URL)")
    p.add_argument("--candidates", type=int, help="search.candidates of the store (default: unset)")
    p.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    p.add_argument("--requests", "-n", type=int, default=300, help="per mode, concurrency, round")
    p.add_argument("--warmup", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--index", help="index name (default: the latency benchmark's)")
    p.add_argument("--corpus", default=str(SCIFACT / "corpus.jsonl"))
    p.add_argument("--queries", default=str(SCIFACT / "queries-train.jsonl"))
    p.add_argument("--qrels", default=str(SCIFACT / "qrels" / "train.tsv"))
    p.add_argument("--out", help="write the raw blocks as JSON here")
    args = p.parse_args(argv)
    args.url = args.url or os.environ.get(f"A2M_TEST_{args.engine.upper()}_URL")
    if not args.url:
        p.error("no node URL: pass --url or set A2M_TEST_<ENGINE>_URL")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    print(run(parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
