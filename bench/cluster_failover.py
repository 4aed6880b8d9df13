"""A 3-node cluster loses a node under a steady recall load through a real gateway.

    python -m bench.cluster_failover [--engine opensearch3] [--window 20] [--concurrency 6]

Starts the local cluster of ``tests/engines/engines.py cluster`` (3 JVMs, 512 MiB heaps),
loads SciFact into an index with 2 shards and 1 replica, starts ``a2m-gateway serve`` with
all three nodes in ``connection.hosts``, and runs closed-loop workers (lexical recall,
hybrid recall, timeline) while it, one phase after the other:

1. kills a node that is not the elected cluster manager (SIGKILL), for ``--window`` s;
2. restarts it (same data, same port; the load goes on while it rejoins), then measures
   for ``--window`` s whether the gateway sends it requests again;
3. stops another non-manager node with SIGSTOP (it hangs: connections open, no answer);
4. resumes it (SIGCONT) and measures again whether it is used.

Per phase: calls, failed calls (anything but a result), p50/p99/max latency, /readyz
answers that were not 200 and breaker states that were not closed (sampled every 0.25 s),
and for the return phases the HTTP connections the node accepted (its own counter, asked
of another node). A fault benchmark: nothing here is a pass/fail threshold.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench import machine
from bench.cluster_load import Load, Phase, phase_rows, sample_ready
from bench.process import start_gateway, stop_server
from tests.support import cluster as local
from tests.support import lucene_loader
from tests.support.scifact import load_scifact

INDEX = "a2m-failover-scifact"
ENGINE_KIND: dict[str, lucene_loader.Engine] = {
    "opensearch3": "opensearch",
    "elasticsearch9": "elasticsearch",
}


def store(engine: lucene_loader.Engine, urls: Sequence[str]) -> dict[str, Any]:
    """The SciFact store over every node of the cluster; connection defaults otherwise."""
    return {
        "backend": engine,
        "index": INDEX,
        "connection": {"hosts": list(urls)},
        "mapping": {
            "id": "doc_id",
            "content": "text",
            "key": "key",
            "group": "group",
            "created_at": "created_at",
            "metadata": ["title"],
        },
        "search": {
            "mode": "lexical",
            "text_fields": ["title", "text"],
            "vector_field": "embedding",
        },
    }


def victims(cluster: local.Cluster) -> tuple[str, str]:
    """Two members that are not the elected cluster manager: one to kill, one to stop."""
    elected = local.manager(cluster.urls[0])
    others = [m for m in cluster.members if m != elected]
    return others[0], others[1]


class Script:
    """The phases, in order, each timed on the load's clock."""

    def __init__(self, cluster: local.Cluster, window_s: float, t0: float) -> None:
        self.cluster = cluster
        self.window_s = window_s
        self.t0 = t0
        self.phases: list[Phase] = []

    def _now(self) -> float:
        return time.monotonic() - self.t0

    async def phase(self, name: str, member: str | None, body: Callable[[], Any]) -> None:
        print(f"[failover] t={self._now():6.1f}s {name}", file=sys.stderr, flush=True)
        phase = Phase(name, member, self._now())
        self.phases.append(phase)
        await body()
        phase.end = self._now()

    def _observer(self, member: str) -> str:
        return next(u for m, u in self.cluster.members.items() if m != member)

    async def _used_again(self, member: str) -> Callable[[], Any]:
        url = self._observer(member)
        before = await asyncio.to_thread(local.http_connections_opened, url, member)

        async def window() -> None:
            await asyncio.sleep(self.window_s)
            after = await asyncio.to_thread(local.http_connections_opened, url, member)
            self.phases[-1].note = f"HTTP connections accepted: {after - before}"

        return window

    async def run(self, killed: str, paused: str) -> None:
        sleep = self.window_s
        await self.phase("baseline", None, lambda: asyncio.sleep(sleep))
        await asyncio.to_thread(local.fault, "kill", killed)
        await self.phase("killed", killed, lambda: asyncio.sleep(sleep))
        await self.phase(
            "restarting", killed, lambda: asyncio.to_thread(local.fault, "restart", killed)
        )
        await self.phase("restarted", killed, await self._used_again(killed))
        await asyncio.to_thread(local.fault, "pause", paused)
        try:
            await self.phase("stopped (SIGSTOP)", paused, lambda: asyncio.sleep(sleep))
        finally:
            await asyncio.to_thread(local.fault, "resume", paused)
        await self.phase("resumed (SIGCONT)", paused, await self._used_again(paused))


async def measure(args: argparse.Namespace, cluster: local.Cluster, work: Path) -> dict[str, Any]:
    engine = ENGINE_KIND[args.engine]
    sf = load_scifact(Path(args.scifact))
    config = {
        "server": {"name": "a2m-failover", "request_timeout_ms": int(args.deadline * 1000)},
        "stores": {"sf": store(engine, cluster.urls)},
    }
    (work / "gateway.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    gateway = await asyncio.to_thread(
        start_gateway, work / "gateway.yaml", work / "data", work / "gateway.log"
    )
    killed, paused = victims(cluster)
    load = Load(gateway.base_url, sf, concurrency=args.concurrency, deadline_s=args.deadline)
    before = machine.load_text()
    t0 = time.monotonic()
    script = Script(cluster, args.window, t0)
    ready: list[tuple[float, int, dict[str, str]]] = []
    stop = asyncio.Event()
    workers = asyncio.create_task(load.run(t0, stop))
    sampler = asyncio.create_task(sample_ready(gateway.base_url, t0, ready, stop))
    try:
        await script.run(killed, paused)
    finally:
        stop.set()
        await asyncio.gather(workers, sampler, return_exceptions=True)
        await asyncio.to_thread(stop_server, gateway.proc)
    log = (work / "gateway.log").read_text(errors="replace")
    return {
        "command": "python -m bench.cluster_failover " + " ".join(args.argv),
        "machine": machine.this_machine().describe(),
        "load_before": before,
        "load_after": machine.load_text(),
        "engine": args.engine,
        "members": list(cluster.members),
        "manager": local.manager(cluster.urls[0]),
        "killed": killed,
        "paused": paused,
        "deadline_s": args.deadline,
        "concurrency": args.concurrency,
        "tracebacks": log.count("Traceback"),
        "phases": phase_rows(script.phases, load.calls, ready),
    }


def markdown(report: dict[str, Any]) -> str:
    head = (
        "| phase | node | s | calls | failed | p50 ms | p99 ms | max ms | /readyz not 200 "
        "| breaker not closed | note |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n"
    )
    rows = "".join(
        f"| {p['phase']} | {p['member'] or ''} | {p['seconds']} | {p['calls']} | {p['failed']} "
        f"| {p['p50_ms']} | {p['p99_ms']} | {p['max_ms']} | {p['not_ready']}/{p['ready_samples']} "
        f"| {p['breaker_open']} | {p['note']} |\n"
        for p in report["phases"]
    )
    return head + rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the cluster (stopped again unless --keep-cluster), load it, measure.

    Raises:
        RuntimeError: the cluster, the index or the gateway did not come up.
    """
    engine = ENGINE_KIND[args.engine]
    cluster = local.start(args.engine)
    try:
        sf = load_scifact(Path(args.scifact))
        lucene_loader.load_index(engine, cluster.urls[0], INDEX, sf)
        local.replicate(cluster.urls[0], INDEX, 1)
        with tempfile.TemporaryDirectory(prefix="a2m-failover-") as tmp:
            return asyncio.run(measure(args, cluster, Path(tmp)))
    finally:
        if not args.keep_cluster:
            local.stop(args.engine)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.cluster_failover", description=__doc__)
    p.add_argument("--engine", choices=sorted(ENGINE_KIND), default="opensearch3")
    p.add_argument("--window", type=float, default=20.0, help="seconds per measured phase")
    p.add_argument("--concurrency", type=int, default=6)
    p.add_argument("--deadline", type=float, default=10.0, help="server.request_timeout_ms, s")
    p.add_argument(
        "--scifact", default=os.environ.get("A2M_SCIFACT_DIR", "/work/shared/data/scifact")
    )
    p.add_argument("--keep-cluster", action="store_true", help="leave the cluster running")
    p.add_argument("--json", dest="json_path", help="write the report as JSON here")
    args = p.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    print(
        f"`{report['command']}` — {report['machine']}; load average {report['load_before']} "
        f"before, {report['load_after']} after; {report['engine']}, members "
        f"{', '.join(report['members'])} (manager {report['manager']}), deadline "
        f"{report['deadline_s']} s, concurrency {report['concurrency']}, "
        f"{report['tracebacks']} tracebacks in the gateway log.\n"
    )
    print(markdown(report))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
