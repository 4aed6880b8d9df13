"""The soak, end to end: nodes, corpus, one fault proxy per node, a real gateway, load, faults.

By default it starts a private engine set (``A2M_ENGINES_HOME``, default
/tmp/engines-soak) that it may kill; ``--node NAME=URL`` instead puts the
proxy in front of a node it must not touch, and the kill phase then takes the
proxy down rather than the node (what the CI smoke does with the shared nodes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from bench import machine
from bench.process import GatewayProcess, start_gateway, stop_server
from bench.soak.faults import (
    ENGINES_PY,
    FAULTS,
    Breakers,
    FaultScript,
    PrivateNodes,
    Step,
    plan,
)
from bench.soak.load import Load, Query
from bench.soak.proxy import FaultProxy
from bench.soak.report import build
from bench.soak.service import breaker_transitions
from tests.support import lucene_loader
from tests.support.scifact import SciFact, load_scifact

NODES = ("opensearch", "elasticsearch")
ENGINE_OF: dict[str, lucene_loader.Engine] = {
    "opensearch": "opensearch",
    "elasticsearch": "elasticsearch",
}
DEFAULT_HOME = "/tmp/engines-soak"  # noqa: S108 - the private set's documented home
TAIL = 10**6  # the healthy phase after the script, ended by the end of the load


def store_config(engine: str, url: str, index: str) -> dict[str, Any]:
    """The SciFact store on ``engine`` behind ``url`` (its proxy)."""
    return {
        "backend": engine,
        "index": index,
        "connection": {"hosts": [url]},
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


def _private_nodes(home: Path, names: Sequence[str]) -> dict[str, str]:
    """Start (or find running) the private nodes; their URLs.

    Raises:
        RuntimeError: a node did not start.
    """
    PrivateNodes(home)  # refuses the shared home before anything runs
    env = {**os.environ, "A2M_ENGINES_HOME": str(home)}
    only = [a for n in names for a in ("--only", n)]
    started = subprocess.run(
        [sys.executable, str(ENGINES_PY), "start", *only],
        env=env,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if started.returncode != 0:
        raise RuntimeError(f"the private engines in {home} did not start")
    state = json.loads(
        subprocess.run(
            [sys.executable, str(ENGINES_PY), "state"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    return {n: str(state[n]["url"]) for n in names}


def _stop_private(home: Path, names: Sequence[str]) -> None:
    only = [a for n in names for a in ("--only", n)]
    subprocess.run(
        [sys.executable, str(ENGINES_PY), "stop", *only],
        env={**os.environ, "A2M_ENGINES_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        check=False,
    )


def _queries(sf: SciFact) -> list[Query]:
    return [Query(sf.queries[q], sf.query_vector(q)) for q in sf.query_ids]


async def _sample_rss(pid: int, samples: list[tuple[float, float]], t0: float) -> None:
    while True:
        rss = machine.rss_mib(pid)
        if rss is not None:
            samples.append((time.monotonic() - t0, rss))
        await asyncio.sleep(1.0)


def _breakers_of(client: httpx.AsyncClient) -> Breakers:
    """Reads the gateway's breaker transitions from its /metrics (empty if it cannot)."""

    async def read() -> dict[str, Counter[str]]:
        try:
            text = (await client.get("/metrics")).text
        except httpx.HTTPError:
            return {}
        return breaker_transitions(text)

    return read


def _rss_summary(
    samples: Sequence[tuple[float, float]], ready: float | None, baseline_end: float
) -> dict[str, float | None]:
    after = [r for t, r in samples if t >= baseline_end]
    summary = {
        "ready": ready,
        "start": after[0] if after else None,
        "end": samples[-1][1] if samples else None,
        "max": max((r for _, r in samples), default=None),
    }
    return {k: None if v is None else round(v, 1) for k, v in summary.items()}


async def _start_proxies(urls: dict[str, str]) -> dict[str, FaultProxy]:
    """One fault proxy in front of each node, by the node's name."""
    proxies = {}
    for name, url in urls.items():
        parts = urlsplit(url)
        proxies[name] = FaultProxy(parts.hostname or "127.0.0.1", parts.port or 80, name=name)
        await proxies[name].start()
    return proxies


def _load_of(args: argparse.Namespace, base_url: str, stores: list[str], sf: SciFact) -> Load:
    """SciFact's queries, and about 500 document keys spread over the corpus, on every store."""
    keys = [f"scifact/{d}" for d in sf.corpus_ids[:: max(1, len(sf.corpus_ids) // 500)]]
    return Load(
        base_url,
        stores,
        _queries(sf),
        keys,
        concurrency=args.concurrency,
        deadline_s=args.deadline,
        max_requests=args.requests,
        seed=args.seed,
    )


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _meta(
    args: argparse.Namespace,
    urls: dict[str, str],
    private: PrivateNodes | None,
    steps: Sequence[Step],
    script: FaultScript,
    gateway: GatewayProcess,
    load_before: str,
    t0: float,
    cpu: float | None,
) -> dict[str, Any]:
    """The run's conditions, reported beside its results."""
    planned = [s.kind if s.node is None else f"{s.kind} {s.node}" for s in steps]
    return {
        "machine": machine.this_machine().describe(),
        "load_before": load_before,
        "load_after": machine.load_text(),
        "command": "python -m bench.soak " + " ".join(args.argv),
        "engines": "private" if private else "shared (kill = proxy down)",
        "nodes": list(urls),
        "concurrency": args.concurrency,
        "deadline_s": args.deadline,
        "duration_s": round(time.monotonic() - t0, 1),
        "planned_phases": planned,
        "phases_run": len(script.phases) - 1,
        "gateway_ready_s": round(gateway.ready_after_s, 2),
        "gateway_cpu_ms_per_request": cpu,
    }


async def _soak(
    args: argparse.Namespace,
    urls: dict[str, str],
    private: PrivateNodes | None,
    sf: SciFact,
    work: Path,
) -> dict[str, Any]:
    proxies = await _start_proxies(urls)
    stores = {n: store_config(n, p.url, args.index) for n, p in proxies.items()}
    config = {
        "server": {"name": "a2m-soak", "request_timeout_ms": int(args.deadline * 1000)},
        "stores": stores,
    }
    config_path = work / "gateway.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    log_path = work / "gateway.log"  # read by run() once the gateway is gone
    gateway = await asyncio.to_thread(start_gateway, config_path, work / "data", log_path)
    pid = gateway.proc.pid
    rss_ready = machine.rss_mib(pid)
    load = _load_of(args, gateway.base_url, list(stores), sf)
    steps = plan(
        list(urls),
        args.faults,
        fault_s=args.fault_seconds,
        healthy_s=args.healthy_seconds,
        baseline_s=args.baseline_seconds,
    )
    load_before = machine.load_text()
    t0 = time.monotonic()
    scraper = httpx.AsyncClient(base_url=gateway.base_url, timeout=5.0)
    script = FaultScript(proxies, private, t0=t0, slow_s=args.slow, breakers=_breakers_of(scraper))
    samples: list[tuple[float, float]] = []
    cpu_before = machine.cpu_seconds(pid)
    sampler = asyncio.create_task(_sample_rss(pid, samples, t0))
    faults = asyncio.create_task(script.run([*steps, Step("healthy", None, TAIL)]))
    try:
        await load.run(t0, t0 + args.duration)
    finally:
        await _cancel(faults)
        await _cancel(sampler)
        await scraper.aclose()
        cpu_after = machine.cpu_seconds(pid)
        samples.append((time.monotonic() - t0, machine.rss_mib(pid) or 0.0))
        await asyncio.to_thread(stop_server, gateway.proc)
        for proxy in proxies.values():
            await proxy.close()
    cpu = None
    if cpu_before is not None and cpu_after is not None and load.calls:
        cpu = round(1000 * (cpu_after - cpu_before) / len(load.calls), 3)
    meta = _meta(args, urls, private, steps, script, gateway, load_before, t0, cpu)
    baseline_end = script.phases[0].end if script.phases else 0.0
    return build(
        load.calls,
        script.phases,
        {n: n for n in urls},
        rss_mib=_rss_summary(samples, rss_ready, baseline_end),
        meta=meta,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole soak; the report as a dict.

    Raises:
        RuntimeError: the private engines or the gateway did not start.
    """
    shared = dict(n.split("=", 1) for n in args.node)
    names = list(shared) or list(args.engines)
    home = Path(args.engines_home)
    private = None if shared else PrivateNodes(home)
    urls = shared or _private_nodes(home, names)
    sf = load_scifact(Path(args.scifact))
    for name, url in urls.items():
        lucene_loader.load_index(ENGINE_OF[name], url, args.index, sf)
    try:
        with tempfile.TemporaryDirectory(prefix="a2m-soak-") as tmp:
            report = asyncio.run(_soak(args, urls, private, sf, Path(tmp)))
            log_text = (Path(tmp) / "gateway.log").read_text(errors="replace")
        if args.gateway_log:
            Path(args.gateway_log).write_text(log_text)
        # Stack traces in the log under faults are a log storm, and they name hosts.
        report["gateway_log_tracebacks"] = log_text.count("Traceback")
        return report
    finally:
        if private is not None and not args.keep_engines:
            _stop_private(home, names)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description="A bounded soak of a real gateway while a fault script hits its engines.",
    )
    p.add_argument("--duration", type=float, default=600.0, help="seconds of load (cap)")
    p.add_argument("--requests", type=int, default=None, help="stop after this many calls")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--deadline", type=float, default=5.0, help="per call, seconds")
    p.add_argument("--slow", type=float, default=2.0, help="latency the slow phase adds, s")
    p.add_argument("--baseline-seconds", type=float, default=20.0)
    # 20 + 2 x (15 + ~100 s restart under load + 10 + 6 x 25) ~ 570 s: the plan fits 10 min.
    p.add_argument("--fault-seconds", type=float, default=15.0)
    p.add_argument("--healthy-seconds", type=float, default=10.0)
    p.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    p.add_argument("--engines", nargs="+", choices=NODES, default=list(NODES))
    p.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="use this running node (never killed: the kill phase downs the proxy instead)",
    )
    # Not read from A2M_ENGINES_HOME: a shell set up for the shared nodes must not lend them.
    p.add_argument("--engines-home", default=DEFAULT_HOME, help="the private set's home")
    p.add_argument("--keep-engines", action="store_true", help="leave the private set running")
    p.add_argument("--index", default="a2m-soak-scifact")
    p.add_argument(
        "--scifact", default=os.environ.get("A2M_SCIFACT_DIR", "/work/shared/data/scifact")
    )
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--json", dest="json_path", help="write the report as JSON here")
    p.add_argument("--gateway-log", help="keep a copy of the gateway's log here")
    p.add_argument("--write-docs", action="store_true", help="put the table in docs/benchmarks.md")
    args = p.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    for spec in args.node:
        name, sep, url = spec.partition("=")
        if not sep or name not in NODES or not url.startswith("http://"):
            p.error(f"--node wants opensearch=URL or elasticsearch=URL, not {spec!r}")
    return args
