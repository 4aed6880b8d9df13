"""Recall latency of the gateway over HTTP, against the embedded demo store (not a test).

Starts ``a2m-gateway serve`` as a subprocess on a fresh data directory (so the
first start indexes the packaged corpus), waits for ``/readyz``, warms up, then
sends N ``memory/recall`` calls at concurrency 1 and at ``--concurrency``, with
queries drawn from the demo corpus's own topics (section titles, groups, keys)
and a few shapes of params. Prints one table: p50/p99/mean latency and
throughput per concurrency, the gateway's RSS (``VmRSS`` from
``/proc/<pid>/status``) after each run, and the time from process start to
ready, cold (indexing) and warm (already indexed).

    python -m bench.recall_latency --requests 500 --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.latency.ways import drive
from bench.process import start_gateway, stop_server

CALL_TIMEOUT_S = 30.0
TOPICS = [
    "how are scores normalised",
    "what does a read-only server answer to remember",
    "timeline order when there is no date field",
    "origin header and loopback binding",
    "key prefix matching",
    "capability not supported error code",
    "hybrid search with reciprocal rank fusion",
    "configure an elasticsearch store with an api key",
    "helm chart probes and config map",
    "prompt styles and character budget",
]


@dataclass(frozen=True)
class Run:
    concurrency: int
    latencies_s: list[float]
    wall_s: float
    errors: int
    rss_kib: int | None

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile, in milliseconds."""
        ordered = sorted(self.latencies_s)
        rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
        return ordered[rank - 1] * 1000.0

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.latencies_s) * 1000.0

    @property
    def throughput(self) -> float:
        return len(self.latencies_s) / self.wall_s


def rss_kib(pid: int) -> int | None:
    """Resident set size of a process, from /proc (Linux); None elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def build_workload(http: httpx.Client, path: str, n: int, seed: int) -> list[dict[str, Any]]:
    """n recall params: mostly free text from the corpus's own titles, some filtered shapes."""
    body = {"jsonrpc": "2.0", "id": 0, "method": "memory/timeline", "params": {"limit": 100}}
    records = http.post(path, json=body).json()["result"]["records"]
    titles = [r.get("metadata", {}).get("title") or r.get("content", "")[:60] for r in records]
    groups = sorted({r["group"] for r in records if "group" in r})
    prefixes = sorted({r["key"].rsplit("/", 1)[0] + "/" for r in records if "key" in r})
    queries = [t for t in titles if t] + TOPICS
    rng = random.Random(seed)
    workload: list[dict[str, Any]] = []
    for _ in range(n):
        roll = rng.random()
        params: dict[str, Any] = {"query": rng.choice(queries), "limit": 10}
        if roll < 0.10 and groups:
            params["where"] = {"group": rng.choice(groups)}
        elif roll < 0.20 and prefixes:
            params["key_prefix"] = rng.choice(prefixes)
        elif roll < 0.25:
            params = {"limit": 10}  # no query: most recent first
        elif roll < 0.35:
            params["prompt"] = {"style": "facts", "cite": True, "budget": 1600}  # characters
        workload.append(params)
    return workload


async def run(base_url: str, path: str, workload: list[dict[str, Any]], concurrency: int) -> Run:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=CALL_TIMEOUT_S, limits=limits) as http:

        async def call(i: int, params: dict[str, Any]) -> bool:
            body = {"jsonrpc": "2.0", "id": i, "method": "memory/recall", "params": params}
            r = await http.post(path, json=body)
            return r.status_code == 200 and "result" in r.json()

        latencies, wall, errors = await drive(call, workload, concurrency)
    return Run(concurrency, latencies, wall, errors, None)


def table(runs: list[Run], cold_s: float, warm_s: float | None) -> str:
    header = ["", *(f"concurrency {r.concurrency}" for r in runs)]
    rows: list[list[str]] = [
        ["recall calls", *(str(len(r.latencies_s)) for r in runs)],
        ["errors", *(str(r.errors) for r in runs)],
        ["p50 latency (ms)", *(f"{r.percentile(50):.2f}" for r in runs)],
        ["p99 latency (ms)", *(f"{r.percentile(99):.2f}" for r in runs)],
        ["mean latency (ms)", *(f"{r.mean_ms:.2f}" for r in runs)],
        ["max latency (ms)", *(f"{max(r.latencies_s) * 1000:.2f}" for r in runs)],
        ["throughput (req/s)", *(f"{r.throughput:.1f}" for r in runs)],
        [
            "gateway RSS after run (MiB)",
            *(f"{r.rss_kib / 1024:.1f}" if r.rss_kib else "n/a" for r in runs),
        ],
        ["start to ready, cold (s)", *(f"{cold_s:.2f}" for _ in runs)],
    ]
    if warm_s is not None:
        rows.append(["start to ready, warm (s)", *(f"{warm_s:.2f}" for _ in runs)])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="recall_latency", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--requests", "-n", type=int, default=500, help="recall calls per run")
    parser.add_argument(
        "--concurrency",
        "-c",
        type=int,
        default=8,
        help="concurrency of the second run (the first is 1)",
    )
    parser.add_argument("--warmup", type=int, default=50, help="calls before measuring")
    parser.add_argument("--config", help="gateway config (default: the embedded demo store)")
    parser.add_argument("--store", help="store name for POST /a2m/<store> (default: /a2m)")
    parser.add_argument("--data-dir", help="A2M_DATA_DIR (default: a fresh temporary one)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--no-warm-start", action="store_true", help="skip the restart that times a warm start"
    )
    args = parser.parse_args(argv)
    if args.requests < 1 or args.concurrency < 1 or args.warmup < 0:
        parser.error("--requests and --concurrency must be positive, --warmup not negative")
    return args


def measure(base_url: str, pid: int, path: str, args: argparse.Namespace) -> list[Run]:
    """The warm-up calls, then the workload at concurrency 1 and at ``--concurrency``, with
    the gateway's RSS after each."""
    with httpx.Client(base_url=base_url, timeout=CALL_TIMEOUT_S) as http:
        workload = build_workload(http, path, args.requests, args.seed)
        warm = build_workload(http, path, args.warmup, args.seed + 1)
    asyncio.run(run(base_url, path, warm, min(args.concurrency, 4)))
    runs = []
    for concurrency in dict.fromkeys([1, args.concurrency]):
        result = asyncio.run(run(base_url, path, workload, concurrency))
        runs.append(
            Run(
                result.concurrency,
                result.latencies_s,
                result.wall_s,
                result.errors,
                rss_kib(pid),
            )
        )
    return runs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = f"/a2m/{args.store}" if args.store else "/a2m"
    with tempfile.TemporaryDirectory(prefix="a2m-bench-") as tmp:
        data_dir = Path(args.data_dir) if args.data_dir else Path(tmp) / "data"
        log_path = Path(tmp) / "gateway.log"
        server = start_gateway(args.config, data_dir, log_path)
        cold_s = server.ready_after_s
        try:
            runs = measure(server.base_url, server.proc.pid, path, args)
        finally:
            stop_server(server.proc)
        warm_s: float | None = None
        if not args.no_warm_start:
            again = start_gateway(args.config, data_dir, log_path)
            warm_s = again.ready_after_s
            stop_server(again.proc)

    print(
        f"a2m-gateway recall over HTTP: {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, client and server on one host, "
        f"{args.requests} calls per run after {args.warmup} warm-up calls"
    )
    print(table(runs, cold_s, warm_s))
    return 1 if any(r.errors for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
