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
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from bench import machine
from bench.latency import peer as peer_mod
from bench.process import GatewayProcess, spawn_until_ready, start_gateway, stop_server
from bench.quality.collection import Split, load_split
from bench.quality.harness import SCIFACT
from tests.support import lucene_loader

LIMIT = 10
KNN_DEPTH = 100
"""The gateway's default ``search.candidates``: its kNN depth (OS ``k``, ES num_candidates)."""
SOURCE = ["text", "key", "title"]
"""``mapping.source_fields()`` of the store below: the only fields either side fetches."""
TEXT_FIELDS = ["title", "text"]
JSON_HEADERS = {"content-type": "application/json"}
FLOORS = {
    "floor": "official",
    "floor-gateway-http": "gateway-http",
    "floor-raw": "raw",
    "floor-none": "none",
}
"""The floor ways (bench/latency/floor.py) and the engine client each uses."""
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MCP_VERSION = "2026-07-28"
MODERN_HEADERS = {
    "mcp-protocol-version": MCP_VERSION,
    "mcp-method": "tools/call",
    "mcp-name": "search",
}


@dataclass(frozen=True)
class Item:
    text: str | None
    vector: list[float] | None
    query: str = ""
    """The query's text, also for a kNN item (what an MCP `search` sends)."""


@dataclass
class Block:
    """One way at one concurrency in one round."""

    way: str
    concurrency: int
    round: int
    latencies_s: list[float]
    wall_s: float
    errors: int
    load: float
    cpu_ms: dict[str, float] = field(default_factory=dict)
    """CPU milliseconds per request of each server process (gateway, peer, engine)."""

    def percentile(self, q: float) -> float:
        return percentile(self.latencies_s, q)

    @property
    def throughput(self) -> float:
        return len(self.latencies_s) / self.wall_s if self.wall_s else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile in milliseconds."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return ordered[rank - 1] * 1000.0


# ---- the query mix and its three spellings


def workload(split: Split, n: int, dense_share: float, seed: int) -> list[Item]:
    rng = random.Random(seed)
    qids = list(split.query_ids)
    items = []
    for _ in range(n):
        qid = rng.choice(qids)
        if rng.random() < dense_share:
            items.append(Item(None, split.sf.query_vector(qid), split.sf.queries[qid]))
        else:
            items.append(Item(split.sf.queries[qid], None, split.sf.queries[qid]))
    return items


def recall_params(item: Item) -> dict[str, Any]:
    if item.text is not None:
        return {"query": item.text, "limit": LIMIT}
    return {"embedding": item.vector, "limit": LIMIT}


def recall_call(item: Item, request_id: int) -> bytes:
    """One A2M ``memory/recall`` request."""
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "memory/recall",
            "params": recall_params(item),
        }
    )


def recall_ok(raw: bytes) -> bool:
    """Whether an A2M answer carries a result (not an error)."""
    answer = orjson.loads(raw)
    return isinstance(answer, dict) and "result" in answer


def mcp_search(item: Item, request_id: int) -> bytes:
    """One stateless 2026-07-28 ``tools/call search`` (the envelope the SDK's client sends)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {
                "name": "search",
                "arguments": {"query": item.query, "limit": LIMIT},
                "_meta": meta,
            },
        }
    )


def opensearch_body(item: Item) -> dict[str, Any]:
    """The body the gateway's OpenSearch connector sends for the same recall."""
    body: dict[str, Any] = {
        "size": LIMIT,
        "_source": {"includes": SOURCE},
        "track_total_hits": False,
    }
    if item.text is not None:
        body["query"] = {
            "multi_match": {"query": item.text, "fields": TEXT_FIELDS, "type": "best_fields"}
        }
    else:
        body["query"] = {"knn": {"embedding": {"vector": item.vector, "k": KNN_DEPTH}}}
    return body


def elasticsearch_body(item: Item) -> dict[str, Any]:
    """The body the gateway's Elasticsearch connector sends for the same recall."""
    if item.text is not None:
        return opensearch_body(item)
    return {
        "size": LIMIT,
        "_source": {"includes": SOURCE},
        "track_total_hits": False,
        "knn": {
            "field": "embedding",
            "query_vector": item.vector,
            "k": LIMIT,
            "num_candidates": KNN_DEPTH,
        },
    }


def store_config(engine: str, url: str, index: str) -> dict[str, Any]:
    return {
        "backend": engine,
        "index": index,
        "connection": {"hosts": [url], "pool_maxsize": 64},
        "mapping": {"content": "text", "key": "key", "metadata": ["title"]},
        "search": {"mode": "lexical", "text_fields": TEXT_FIELDS, "vector_field": "embedding"},
    }


def start_floor(way: str, url: str, index: str, log: Path) -> GatewayProcess:
    """A floor server (bench/latency/floor.py) with the way's engine client."""

    def command(port: int) -> list[str]:
        return [
            *(sys.executable, "-m", "bench.latency.floor", "--port", str(port)),
            *("--opensearch-url", url, "--index", index, "--client", FLOORS[way]),
        ]

    return spawn_until_ready(command, os.environ, log, health_path="/readyz", what=way)


# ---- one way, one concurrency

Call = Callable[[int, Item], Awaitable[bool]]


async def drive(
    call: Call, items: Sequence[Item], concurrency: int
) -> tuple[list[float], float, int]:
    """Send every item with ``concurrency`` workers: (latencies, wall seconds, errors)."""
    next_index = 0
    latencies: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal next_index, errors
        while next_index < len(items):
            i = next_index
            next_index += 1
            start = time.perf_counter()
            try:
                ok = await call(i, items[i])
            except Exception:
                ok = False
            latencies.append(time.perf_counter() - start)
            if not ok:
                errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - start, errors


class Ways:
    """The clients of each way, opened once per block so every way pays the same setup."""

    def __init__(
        self, args: argparse.Namespace, index: str, gateway_url: str, peer_url: str | None
    ) -> None:
        self.args = args
        self.index = index
        self.gateway_url = gateway_url
        self.peer_url = peer_url
        self.floor_urls: dict[str, str] = {}
        """The base URL of each floor server (bench/latency/floor.py) started."""

    async def block(
        self, way: str, items: Sequence[Item], warmup: Sequence[Item], concurrency: int
    ) -> tuple[list[float], float, int]:
        if way in ("direct", "es-direct"):
            return await self._direct(way, items, warmup, concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
        async with aiohttp.ClientSession(connector=connector) as http:
            call: Call
            if way in ("gateway", "es-gateway", *FLOORS):
                store = "opensearch" if way != "es-gateway" else "elasticsearch"
                url = self.floor_urls[way] if way in FLOORS else f"{self.gateway_url}/a2m/{store}"

                async def call(i: int, item: Item) -> bool:
                    body = recall_call(item, i)
                    async with http.post(url, data=body, headers=JSON_HEADERS) as r:
                        raw = await r.read()
                    return r.status == 200 and recall_ok(raw)

            elif way == "mcp":
                url = f"{self.gateway_url}/mcp/opensearch"
                headers = {**MCP_HEADERS, **MODERN_HEADERS}

                async def call(i: int, item: Item) -> bool:
                    body = mcp_search(item, i)
                    async with http.post(url, data=body, headers=headers) as r:
                        raw = await r.read()
                    return r.status == 200 and peer_mod.answer_ok(raw)

            elif way == "peer":
                assert self.peer_url is not None
                url = f"{self.peer_url}/mcp"

                async def call(i: int, item: Item) -> bool:
                    body = peer_mod.tool_call(self.index, opensearch_body(item), i)
                    async with http.post(url, data=body, headers=MCP_HEADERS) as r:
                        raw = await r.read()
                    return r.status == 200 and peer_mod.answer_ok(raw)

            else:
                raise ValueError(way)
            await drive(call, warmup, concurrency)
            return await drive(call, items, concurrency)

    async def _direct(
        self, way: str, items: Sequence[Item], warmup: Sequence[Item], concurrency: int
    ) -> tuple[list[float], float, int]:
        client: Any
        if way == "direct":
            from opensearchpy import AsyncOpenSearch

            client = AsyncOpenSearch(
                hosts=[self.args.opensearch_url], maxsize=max(concurrency, 10), timeout=30
            )
            spell = opensearch_body
        else:
            from elasticsearch import AsyncElasticsearch

            client = AsyncElasticsearch(
                self.args.elasticsearch_url,
                request_timeout=30,
                connections_per_node=max(concurrency, 10),
            )
            spell = elasticsearch_body
        try:

            async def call(i: int, item: Item) -> bool:
                response = await client.search(index=self.index, body=spell(item))
                return "hits" in response

            await drive(call, warmup, concurrency)
            return await drive(call, items, concurrency)
        finally:
            await client.close()


# ---- report


@dataclass
class Report:
    machine: str
    started: str
    requests: int
    rounds: int
    dense_share: float
    concurrency: list[int]
    ways: list[str]
    gateway_ready_s: float
    gateway_rss_mib: float | None
    peer_ready_s: float | None
    peer_rss_mib: float | None
    peer_version: str | None
    load_before: str
    load_after: str = ""
    blocks: list[Block] = field(default_factory=list)
    profile: str | None = None


def _blocks(report: Report, way: str, c: int) -> list[Block]:
    return [b for b in report.blocks if b.way == way and b.concurrency == c]


def _pooled(blocks: Sequence[Block]) -> tuple[float, float, float, int, int, float]:
    """(p50 ms, p99 ms, throughput, requests, errors, mean load) over a way's rounds."""
    lat = [x for b in blocks for x in b.latencies_s]
    wall = sum(b.wall_s for b in blocks)
    return (
        percentile(lat, 50),
        percentile(lat, 99),
        len(lat) / wall if wall else 0.0,
        len(lat),
        sum(b.errors for b in blocks),
        statistics.fmean(b.load for b in blocks) if blocks else 0.0,
    )


def _paired(
    report: Report, num: str, den: str, c: int, metric: Callable[[Block, Block], float]
) -> list[float]:
    a = {b.round: b for b in _blocks(report, num, c)}
    d = {b.round: b for b in _blocks(report, den, c)}
    return [metric(a[r], d[r]) for r in sorted(a) if r in d]


def _cpu(blocks: Sequence[Block], way: str) -> str:
    """Median CPU ms per request of the processes this way goes through: the server in
    front of the engine (the gateway, or a floor server), the peer, the engine."""
    engine = "elasticsearch" if way.startswith("es-") else "opensearch"
    front = way if way in FLOORS else "gateway"
    names = [front] if "gateway" in way or way in ("mcp", *FLOORS) else [way]
    parts = []
    for name in [front, "peer", engine]:
        values = [b.cpu_ms[name] for b in blocks if name in b.cpu_ms]
        if name in (front, "peer") and name not in names:
            parts.append("-")
        elif values:
            part = f"{statistics.median(values):.2f}"
            kernel = [b.cpu_ms["gateway-sys"] for b in blocks if "gateway-sys" in b.cpu_ms]
            if name == "gateway" and kernel:
                part += f" (sys {statistics.median(kernel):.2f})"
            parts.append(part)
        else:
            parts.append("n/a")
    return " / ".join(parts)


def _span(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}..{format(max(values), fmt)})"


CPU_PAIRS = (("gateway", "floor"), ("gateway", "floor-gateway-http"), ("mcp", "gateway"))
"""CPU per request compared: the gateway against the floor with the client's own HTTP
layer and with the gateway's, and an MCP tool call against an A2M recall."""


def _cpu_ratios(report: Report) -> list[str]:
    def front(way: str) -> str:
        return way if way in FLOORS else "gateway"

    rows = []
    for num, den in CPU_PAIRS:
        if num not in report.ways or den not in report.ways:
            continue
        top, bottom = front(num), front(den)

        def ratio(a: Block, d: Block, top: str = top, bottom: str = bottom) -> float:
            return a.cpu_ms.get(top, 0.0) / max(d.cpu_ms.get(bottom, 0.0), 1e-9)

        for c in report.concurrency:
            ratios = [r for r in _paired(report, num, den, c, ratio) if r > 0]
            rows.append(f"| {num} / {den} | {c} | {_span(ratios, '.2f')} |")
    if not rows:
        return []
    head = ["", "CPU per request, ratios within each round (median, and min-max over rounds):"]
    return [*head, "", "| pair | concurrency | CPU ratio |", "| --- | ---: | ---: |", *rows]


def markdown(report: Report) -> str:
    lines = [
        "| way | concurrency | p50 ms | p99 ms | throughput req/s | requests | errors "
        "| load (1 min) | CPU ms/req (gateway (kernel share) or floor / peer / engine) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for c in report.concurrency:
        for way in report.ways:
            blocks = _blocks(report, way, c)
            if not blocks:
                continue
            p50, p99, tput, n, err, load = _pooled(blocks)
            lines.append(
                f"| {way} | {c} | {p50:.2f} | {p99:.2f} | {tput:.0f} | {n} | {err} | {load:.2f} "
                f"| {_cpu(blocks, way)} |"
            )
    lines += ["", "Ratios, computed within each round (median, and min-max over rounds):", ""]
    lines += [
        "| pair | concurrency | p50 added ms | p50 ratio | throughput ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    pairs = [
        ("gateway", "direct"),
        ("gateway", "peer"),
        ("mcp", "peer"),
        ("mcp", "gateway"),
        ("es-gateway", "es-direct"),
    ]
    for num, den in pairs:
        if num not in report.ways or den not in report.ways:
            continue
        for c in report.concurrency:
            added = _paired(report, num, den, c, lambda a, d: a.percentile(50) - d.percentile(50))
            ratio = _paired(
                report, num, den, c, lambda a, d: a.percentile(50) / max(d.percentile(50), 1e-9)
            )
            tputs = _paired(
                report, num, den, c, lambda a, d: a.throughput / max(d.throughput, 1e-9)
            )
            lines.append(
                f"| {num} / {den} | {c} | {_span(added, '+.2f')} | {_span(ratio, '.2f')} | "
                f"{_span(tputs, '.2f')} |"
            )
    lines += _cpu_ratios(report)
    rss = f"{report.gateway_rss_mib:.0f} MiB" if report.gateway_rss_mib else "n/a"
    lines += [
        "",
        f"Gateway: start to ready {report.gateway_ready_s:.2f} s, RSS after the runs {rss}.",
    ]
    if report.peer_ready_s is not None:
        prss = f"{report.peer_rss_mib:.0f} MiB" if report.peer_rss_mib else "n/a"
        lines.append(
            f"Peer (opensearch-mcp-server-py {report.peer_version}): start to ready "
            f"{report.peer_ready_s:.2f} s, RSS after the runs {prss}."
        )
    lines.append(
        f"{report.rounds} round(s) x {report.requests} requests per way and concurrency "
        f"({100 * report.dense_share:.0f}% kNN, the rest BM25; {LIMIT} results each). "
        f"Run {report.started} on {report.machine}; the load generator, the gateway, the peer "
        f"and the engine share the machine. Load average (1/5/15 min) {report.load_before} "
        f"before, {report.load_after} after."
    )
    return "\n".join(lines)


def chart(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    colours = {
        "direct": "#4C72B0",
        "gateway": "#55A868",
        "mcp": "#DD8452",
        "peer": "#C44E52",
        "es-direct": "#8172B2",
        "es-gateway": "#64B5CD",
    }
    Stats = tuple[float, float, float, int, int, float]
    panels: list[tuple[str, Callable[[Stats], float]]] = [
        ("p50 latency (ms)", lambda st: st[0]),
        ("p99 latency (ms)", lambda st: st[1]),
        ("throughput (req/s)", lambda st: st[2]),
    ]
    for ax, (title, pick) in zip(axes, panels, strict=True):
        ways = [w for w in report.ways]
        width = 0.8 / max(1, len(ways))
        for j, way in enumerate(ways):
            xs, ys = [], []
            for i, c in enumerate(report.concurrency):
                blocks = _blocks(report, way, c)
                if blocks:
                    xs.append(i + (j - (len(ways) - 1) / 2) * width)
                    ys.append(pick(_pooled(blocks)))
            bars = ax.bar(xs, ys, width * 0.95, label=way, color=colours.get(way))
            ax.bar_label(bars, fmt="%.1f" if "ms" in title else "%.0f", fontsize=7, padding=1)
        ax.set_xticks(
            range(len(report.concurrency)), [f"concurrency {c}" for c in report.concurrency]
        )
        if "ms" in title:
            ax.set_yscale("log")  # the peer is 10-20x slower: a linear axis hides the rest
        ax.set_title(title + (", log scale" if "ms" in title else ""), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        "Same queries against one OpenSearch node: direct client, A2M gateway, "
        "opensearch-mcp-server-py",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- profile


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


# ---- main


def run(args: argparse.Namespace) -> Report:
    ways = list(dict.fromkeys(args.ways))
    if args.es:
        ways += ["es-direct", "es-gateway"]
    split = load_split(Path(args.corpus), Path(args.queries), Path(args.qrels))
    index = args.index or f"a2m-bench-{split.fingerprint()}-{len(split.sf.corpus_ids)}"
    if not args.opensearch_url:
        raise SystemExit("no OpenSearch URL: pass --opensearch-url or set A2M_TEST_OPENSEARCH_URL")
    lucene_loader.load_index("opensearch", args.opensearch_url, index, split.sf)
    stores = {"opensearch": store_config("opensearch", args.opensearch_url, index)}
    if args.es:
        if not args.elasticsearch_url:
            raise SystemExit("--es needs --elasticsearch-url or A2M_TEST_ELASTICSEARCH_URL")
        lucene_loader.load_index("elasticsearch", args.elasticsearch_url, index, split.sf)
        stores["elasticsearch"] = store_config("elasticsearch", args.elasticsearch_url, index)
    items = workload(split, args.requests, args.dense_share, args.seed)
    warm = workload(split, args.warmup, args.dense_share, args.seed + 1)
    report = Report(
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
    with tempfile.TemporaryDirectory(prefix="a2m-latency-") as tmp:
        work = Path(tmp)
        server: dict[str, Any] = {"name": "a2m-bench"}
        if args.log_level:
            server["log_level"] = args.log_level
        config = {"server": server, "stores": stores}
        config_path = work / "gateway.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        gateway = start_gateway(config_path, work / "data", work / "gateway.log")
        report.gateway_ready_s = gateway.ready_after_s
        peer = None
        floors: list[GatewayProcess] = []
        try:
            if "peer" in ways:
                peer = peer_mod.start_peer(
                    Path(args.peer_venv), args.opensearch_url, work / "peer.log"
                )
                report.peer_ready_s = peer.ready_after_s
                report.peer_version = peer.version
            clients = Ways(args, index, gateway.base_url, peer.base_url if peer else None)
            pids = {"gateway": gateway.proc.pid}
            if peer is not None:
                pids["peer"] = peer.proc.pid
            for way in ways:
                if way in FLOORS:
                    floor = start_floor(way, args.opensearch_url, index, work / f"{way}.log")
                    floors.append(floor)
                    clients.floor_urls[way] = floor.base_url
                    pids[way] = floor.proc.pid
            for engine in ("opensearch", "elasticsearch") if args.es else ("opensearch",):
                pid = machine.engine_pid(engine)
                if pid is not None:
                    pids[engine] = pid
            for rnd in range(args.rounds):
                for c in report.concurrency:
                    order = ways if rnd % 2 == 0 else list(reversed(ways))
                    for way in order:
                        load = machine.load_average()[0]
                        before = {k: machine.cpu_seconds(p) for k, p in pids.items()}
                        sys_before = machine.cpu_seconds(gateway.proc.pid, system_only=True)
                        lat, wall, errors = asyncio.run(clients.block(way, items, warm, c))
                        block = Block(way, c, rnd, lat, wall, errors, load)
                        sys_now = machine.cpu_seconds(gateway.proc.pid, system_only=True)
                        if sys_now is not None and sys_before is not None:
                            block.cpu_ms["gateway-sys"] = (
                                1000 * (sys_now - sys_before) / (len(lat) + len(warm))
                            )
                        for k, p in pids.items():
                            now, then = machine.cpu_seconds(p), before[k]
                            if now is not None and then is not None:
                                # The warm-up calls ran in the same window: count them too.
                                block.cpu_ms[k] = 1000 * (now - then) / (len(lat) + len(warm))
                        report.blocks.append(block)
                        print(
                            f"round {rnd} c={c:<3d} {way:10s} p50 {block.percentile(50):7.2f} ms "
                            f"p99 {block.percentile(99):7.2f} ms {block.throughput:7.1f} req/s "
                            f"errors {errors} load {load:.2f}",
                            file=sys.stderr,
                        )
            report.gateway_rss_mib = machine.rss_mib(gateway.proc.pid)
            if peer is not None:
                report.peer_rss_mib = machine.rss_mib(peer.proc.pid)
            if args.profile:
                report.profile = "\n\n".join(
                    profile_gateway(
                        clients,
                        gateway.proc.pid,
                        items,
                        args.profile_seconds,
                        Path(args.profile),
                        c,
                        args.profile_way,
                    )
                    for c in args.profile_concurrency
                )
        finally:
            stop_server(gateway.proc)
            if peer is not None:
                stop_server(peer.proc)
            for floor in floors:
                stop_server(floor.proc)
    report.load_after = machine.load_text()
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    p.add_argument("--opensearch-url", default=os.environ.get("A2M_TEST_OPENSEARCH_URL"))
    p.add_argument("--elasticsearch-url", default=os.environ.get("A2M_TEST_ELASTICSEARCH_URL"))
    p.add_argument("--peer-venv", default=str(peer_mod.DEFAULT_VENV))
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="the gateway's server.log_level (default: the shipped default, info, which "
        "writes one audit line per call)",
    )
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
