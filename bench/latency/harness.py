"""What the gateway costs: one query mix, four ways, side by side, against one OpenSearch node.

(a) direct:  opensearch-py's async client sends the ``_search`` body the gateway would send;
(b) gateway: A2M ``memory/recall`` over HTTP to a real ``a2m-gateway serve`` process;
(c) mcp:     MCP ``tools/call search`` on the same process's ``/mcp/opensearch`` (2026-07-28,
             one stateless POST per call); the tool takes query text only, so a kNN item is
             sent as its query's text (use ``--dense-share 0`` for the same engine work);
(d) peer:    opensearch-mcp-server-py (PyPI, own virtualenv), ``tools/call SearchIndexTool``
             over its streamable HTTP transport, with the same body.

The mix is SciFact's train queries: a share as BM25 text (``multi_match`` over
title and text), the rest as a kNN query with the query's MiniLM vector; 10
results each, ``_source`` limited to the fields the gateway maps. Each round
runs every way at concurrency 1 and at 32, interleaved (so drift in a shared
machine's load hits all ways alike); ratios are computed within a round and
summarised over rounds. Optionally Elasticsearch direct vs gateway too.

    python -m bench.latency                                   # OpenSearch, 3 ways, 3 rounds
    python -m bench.latency --es --rounds 5 --requests 400 --write-docs
    python -m bench.latency --profile /tmp/prof               # py-spy on the gateway under load
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import machine
from bench.latency import peer as peer_mod
from bench.latency.report import Block, Report, chart, markdown
from bench.latency.ways import FLOORS, Ways, start_floor
from bench.latency.workload import Item, store_config, workload
from bench.process import GatewayProcess, start_gateway, stop_server
from bench.quality.collection import SCIFACT, Split, load_split
from tests.support import lucene_loader


@dataclass
class Servers:
    """The processes a run starts: the gateway, the peer when asked for, one per floor way."""

    gateway: GatewayProcess
    peer: peer_mod.PeerServer | None = None
    floors: dict[str, GatewayProcess] = field(default_factory=dict)

    def pids(self) -> dict[str, int]:
        """Each process's pid, by the name its CPU is reported under."""
        pids = {"gateway": self.gateway.proc.pid}
        if self.peer is not None:
            pids["peer"] = self.peer.proc.pid
        for way, floor in self.floors.items():
            pids[way] = floor.proc.pid
        return pids

    def stop(self) -> None:
        stop_server(self.gateway.proc)
        if self.peer is not None:
            stop_server(self.peer.proc)
        for floor in self.floors.values():
            stop_server(floor.proc)


def engine_pids(es: bool) -> dict[str, int]:
    """The engines' pids, where they can be found (their CPU per request is reported too)."""
    pids = {}
    for engine in ("opensearch", "elasticsearch") if es else ("opensearch",):
        pid = machine.engine_pid(engine)
        if pid is not None:
            pids[engine] = pid
    return pids


def profile_gateway(
    ways: Ways,
    pid: int,
    items: Sequence[Item],
    seconds: float,
    out_dir: Path,
    concurrency: int,
    way: str = "gateway",
) -> str:
    """py-spy on the gateway process while ``way`` (A2M recall, or MCP search on the same
    process) sends it ``concurrency`` load; returns the summary text."""
    from bench.latency.profile import summarise_file

    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = ("" if way == "gateway" else f"-{way}") + (
        "" if concurrency == 32 else f"-c{concurrency}"
    )
    raw = out_dir / f"gateway-pyspy{suffix}.txt"
    # Beside this interpreter when run as .venv/bin/python without an activated venv.
    beside = Path(sys.executable).parent / "py-spy"
    spy = subprocess.Popen(
        [
            str(beside) if beside.is_file() else "py-spy",
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--output",
            str(raw),
            "--rate",
            "200",
            "--duration",
            str(int(seconds)),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and spy.poll() is None:
        asyncio.run(ways.block(way, items, [], concurrency))
    _, err = spy.communicate(timeout=seconds + 60)
    if not raw.is_file():
        raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')[-500:]}")
    text = f"{way}, concurrency {concurrency}: " + summarise_file(raw).text()
    (out_dir / f"gateway-profile{suffix}.txt").write_text(text + "\n")
    return text


def load_indexes(args: argparse.Namespace, split: Split, index: str) -> dict[str, dict[str, Any]]:
    """Load the split into OpenSearch (and Elasticsearch with ``--es``): the gateway's stores."""
    if not args.opensearch_url:
        raise SystemExit("no OpenSearch URL: pass --opensearch-url or set A2M_TEST_OPENSEARCH_URL")
    lucene_loader.load_index("opensearch", args.opensearch_url, index, split.sf)
    stores = {"opensearch": store_config("opensearch", args.opensearch_url, index)}
    if args.es:
        if not args.elasticsearch_url:
            raise SystemExit("--es needs --elasticsearch-url or A2M_TEST_ELASTICSEARCH_URL")
        lucene_loader.load_index("elasticsearch", args.elasticsearch_url, index, split.sf)
        stores["elasticsearch"] = store_config("elasticsearch", args.elasticsearch_url, index)
    return stores


def gateway_config(args: argparse.Namespace, stores: dict[str, dict[str, Any]]) -> dict[str, Any]:
    server: dict[str, Any] = {"name": "a2m-bench"}
    if args.log_level:
        server["log_level"] = args.log_level
    return {"server": server, "stores": stores}


def new_report(args: argparse.Namespace, ways: list[str]) -> Report:
    """The report before any block: the run's settings and the machine's load."""
    return Report(
        machine=machine.this_machine().describe(),
        started=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        requests=args.requests,
        rounds=args.rounds,
        dense_share=args.dense_share,
        concurrency=list(dict.fromkeys(args.concurrency)),
        ways=ways,
        gateway_ready_s=0.0,
        gateway_rss_mib=None,
        peer_ready_s=None,
        peer_rss_mib=None,
        peer_version=None,
        load_before=machine.load_text(),
    )


def measure(
    clients: Ways,
    way: str,
    concurrency: int,
    rnd: int,
    items: Sequence[Item],
    warm: Sequence[Item],
    pids: dict[str, int],
) -> Block:
    """One block: the way's calls timed, and the CPU per call of each process in ``pids``
    (the gateway's kernel time also apart)."""
    load = machine.load_average()[0]
    gateway = pids["gateway"]
    before = {k: machine.cpu_seconds(p) for k, p in pids.items()}
    sys_before = machine.cpu_seconds(gateway, system_only=True)
    lat, wall, errors = asyncio.run(clients.block(way, items, warm, concurrency))
    block = Block(way, concurrency, rnd, lat, wall, errors, load)
    sys_now = machine.cpu_seconds(gateway, system_only=True)
    if sys_now is not None and sys_before is not None:
        block.cpu_ms["gateway-sys"] = 1000 * (sys_now - sys_before) / (len(lat) + len(warm))
    for k, p in pids.items():
        now, then = machine.cpu_seconds(p), before[k]
        if now is not None and then is not None:
            # The warm-up calls ran in the same window: count them too.
            block.cpu_ms[k] = 1000 * (now - then) / (len(lat) + len(warm))
    return block


def measure_rounds(
    report: Report,
    clients: Ways,
    items: Sequence[Item],
    warm: Sequence[Item],
    pids: dict[str, int],
) -> None:
    """Every way at every concurrency, round after round, the ways' order reversed every
    other round; each block is added to the report as it ends."""
    for rnd in range(report.rounds):
        for c in report.concurrency:
            order = report.ways if rnd % 2 == 0 else list(reversed(report.ways))
            for way in order:
                block = measure(clients, way, c, rnd, items, warm, pids)
                report.blocks.append(block)
                print(
                    f"round {rnd} c={c:<3d} {way:10s} p50 {block.percentile(50):7.2f} ms "
                    f"p99 {block.percentile(99):7.2f} ms {block.throughput:7.1f} req/s "
                    f"errors {block.errors} load {block.load:.2f}",
                    file=sys.stderr,
                )


def run(args: argparse.Namespace) -> Report:
    ways = list(dict.fromkeys(args.ways))
    if args.es:
        ways += ["es-direct", "es-gateway"]
    split = load_split(Path(args.corpus), Path(args.queries), Path(args.qrels))
    index = args.index or f"a2m-bench-{split.fingerprint()}-{len(split.sf.corpus_ids)}"
    stores = load_indexes(args, split, index)
    items = workload(split, args.requests, args.dense_share, args.seed)
    warm = workload(split, args.warmup, args.dense_share, args.seed + 1)
    report = new_report(args, ways)
    with tempfile.TemporaryDirectory(prefix="a2m-latency-") as tmp:
        work = Path(tmp)
        config_path = work / "gateway.yaml"
        config_path.write_text(yaml.safe_dump(gateway_config(args, stores), sort_keys=False))
        servers = Servers(start_gateway(config_path, work / "data", work / "gateway.log"))
        report.gateway_ready_s = servers.gateway.ready_after_s
        try:
            if "peer" in ways:
                peer = peer_mod.start_peer(
                    Path(args.peer_venv), args.opensearch_url, work / "peer.log"
                )
                servers.peer = peer
                report.peer_ready_s = peer.ready_after_s
                report.peer_version = peer.version
            peer_url = servers.peer.base_url if servers.peer else None
            clients = Ways(args, index, servers.gateway.base_url, peer_url)
            for way in (w for w in ways if w in FLOORS):
                floor = start_floor(way, args.opensearch_url, index, work / f"{way}.log")
                servers.floors[way] = floor
                clients.floor_urls[way] = floor.base_url
            measure_rounds(report, clients, items, warm, servers.pids() | engine_pids(args.es))
            report.gateway_rss_mib = machine.rss_mib(servers.gateway.proc.pid)
            if servers.peer is not None:
                report.peer_rss_mib = machine.rss_mib(servers.peer.proc.pid)
            if args.profile:
                report.profile = "\n\n".join(
                    profile_gateway(
                        clients,
                        servers.gateway.proc.pid,
                        items,
                        args.profile_seconds,
                        Path(args.profile),
                        c,
                        args.profile_way,
                    )
                    for c in args.profile_concurrency
                )
        finally:
            servers.stop()
    report.load_after = machine.load_text()
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _workload_options(p)
    _server_options(p)
    _profile_options(p)
    p.add_argument("--out", help="write the raw report (every latency) as JSON here")
    p.add_argument("--chart", help="write the PNG chart here")
    p.add_argument(
        "--docs-section",
        default="cost",
        help="the marked section of docs/benchmarks.md that --write-docs refreshes; the chart "
        "is docs/img/<section>.png",
    )
    p.add_argument(
        "--write-docs",
        action="store_true",
        help="refresh a section of docs/benchmarks.md and its chart (see --docs-section)",
    )
    args = p.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or min(args.concurrency) < 1:
        p.error("--requests, --rounds and --concurrency must be positive")
    return args


def _workload_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ways",
        nargs="+",
        choices=("direct", "gateway", "mcp", "peer", *FLOORS),
        default=["direct", "gateway", "mcp", "peer"],
    )
    p.add_argument("--es", action="store_true", help="also Elasticsearch direct vs gateway")
    p.add_argument("--concurrency", nargs="+", type=int, default=[1, 32])
    p.add_argument("--requests", "-n", type=int, default=300, help="per way, concurrency, round")
    p.add_argument("--warmup", type=int, default=40, help="untimed calls before each block")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dense-share", type=float, default=0.3, help="share of kNN queries")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--corpus", default=str(SCIFACT / "corpus.jsonl"))
    p.add_argument("--queries", default=str(SCIFACT / "queries-train.jsonl"))
    p.add_argument("--qrels", default=str(SCIFACT / "qrels" / "train.tsv"))
    p.add_argument("--index", help="index name (default: the quality benchmark's)")


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--opensearch-url", default=os.environ.get("A2M_TEST_OPENSEARCH_URL"))
    p.add_argument("--elasticsearch-url", default=os.environ.get("A2M_TEST_ELASTICSEARCH_URL"))
    p.add_argument("--peer-venv", default=str(peer_mod.DEFAULT_VENV))
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="the gateway's server.log_level (default: the shipped default, info, which "
        "writes one audit line per call)",
    )


def _profile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", help="directory for a py-spy profile of the gateway under load")
    p.add_argument("--profile-seconds", type=float, default=20.0)
    p.add_argument(
        "--profile-concurrency",
        type=int,
        nargs="+",
        default=[32],
        help="the load(s) profiled, one py-spy run each (default 32)",
    )
    p.add_argument(
        "--profile-way",
        choices=["gateway", "mcp"],
        default="gateway",
        help="the calls sent while profiling: A2M recall (gateway) or MCP search (mcp)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    table = markdown(report)
    print(table)
    if report.profile:
        print("\n" + report.profile)
    if args.out:
        Path(args.out).write_text(json.dumps(asdict(report)) + "\n")
    chart_path = Path(args.chart) if args.chart else None
    if args.write_docs:
        from bench.docs import BENCHMARKS_MD, IMG_DIR, replace_section

        chart_path = chart_path or IMG_DIR / f"{args.docs_section}.png"
        replace_section(BENCHMARKS_MD, args.docs_section, table)
    if chart_path is not None:
        chart(report, chart_path)
    return 1 if any(b.errors for b in report.blocks) else 0
