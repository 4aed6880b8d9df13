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

``--auth api-key`` or ``--auth jwt`` turns on caller authentication in every gateway
(one API key; with ``jwt`` also HS256 JWTs) and sends that credential on each of its
calls, so the per-call cost of authenticating is in the figures.

``--floor`` and ``--direct`` add more ways to the same slices: the A2M recall sent to
floor servers (bench/latency/floor.py, each its own process with no gateway logic:
``floor`` is opensearch-py as shipped, ``floor-gateway-http`` the same client over the
gateway's HTTP layer) and the engine search sent straight to OpenSearch with
opensearch-py from this process. A second table then gives the per-call budget's A2M
figures for each gateway and floor, with intervals over the same slices: CPU against
the ``floor``, the p50 added over direct, and throughput against direct.

    python -m bench.door_pair --opensearch-url URL [--concurrency 1 32] [--slices 40]
                              [--per-slice 200] [--root DIR]
                              [--floor [floor floor-gateway-http ...]] [--direct]
                              [--auth {none,api-key,jwt}]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import aiohttp
import yaml

from bench import machine
from bench.latency import peer as peer_mod
from bench.latency.ways import FLOORS, Call, start_floor
from bench.latency.workload import (
    JSON_HEADERS,
    MCP_HEADERS,
    MODERN_HEADERS,
    Item,
    mcp_search,
    opensearch_body,
    recall_call,
    recall_ok,
    store_config,
    workload,
)
from bench.pair_tally import WAYS, Picks, Tally
from bench.process import GatewayProcess, start_gateway, stop_server
from bench.quality.collection import SCIFACT, load_split
from tests.support import lucene_loader

SHARED = (*FLOORS, "direct")
"""Ways every gateway's row is compared with: the floor servers, and the engine itself."""


@dataclass
class Lane:
    """One way of sending the workload: its call, and the process whose CPU it costs."""

    way: str
    call: Call
    pid: int | None
    close: Callable[[], Awaitable[None]]

    async def slice(
        self, items: Sequence[Item], first_id: int, concurrency: int
    ) -> tuple[float | None, list[float], float]:
        """Send `items` with `concurrency` workers: (server CPU seconds, latencies, wall)."""
        queue = list(enumerate(items, first_id))
        latencies: list[float] = []

        async def worker() -> None:
            while queue:
                i, item = queue.pop()
                start = time.perf_counter()
                ok = await self.call(i, item)
                latencies.append(time.perf_counter() - start)
                if not ok:
                    raise RuntimeError(f"a {self.way} call failed")

        before = self._cpu()
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - start
        after = self._cpu()
        cpu = None if before is None or after is None else after - before
        return cpu, latencies, wall

    def _cpu(self) -> float | None:
        if self.pid is None:
            return None
        seconds = machine.cpu_seconds(self.pid)
        if seconds is None:
            raise SystemExit("a server's CPU time is read from /proc: Linux only")
        return seconds


def http_lane(
    way: str, url: str, pid: int, concurrency: int, credential: Mapping[str, str] | None = None
) -> Lane:
    """A2M recall (a gateway's or the floor's) or MCP search over a session kept open."""
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
    mcp = way == "mcp"
    headers = {**MCP_HEADERS, **MODERN_HEADERS} if mcp else JSON_HEADERS
    headers = {**headers, **(credential or {})}

    async def call(i: int, item: Item) -> bool:
        body = mcp_search(item, i) if mcp else recall_call(item, i)
        async with session.post(url, data=body, headers=headers) as r:
            raw = await r.read()
        ok = peer_mod.answer_ok(raw) if mcp else recall_ok(raw)
        if r.status != 200 or not ok:
            raise RuntimeError(f"{way} call failed: {r.status} {raw[:200]!r}")
        return True

    return Lane(way, call, pid, session.close)


def direct_lane(opensearch_url: str, index: str, concurrency: int) -> Lane:
    """The engine search the connector would send, with opensearch-py from this process."""
    from opensearchpy import AsyncOpenSearch

    client = AsyncOpenSearch(hosts=[opensearch_url], maxsize=max(concurrency, 10), timeout=30)

    async def call(i: int, item: Item) -> bool:
        return "hits" in await client.search(index=index, body=opensearch_body(item))

    return Lane("direct", call, None, client.close)


async def measure(
    gateways: dict[str, GatewayProcess],
    shared: dict[str, Callable[[int], Lane]],
    items: Sequence[Item],
    args: argparse.Namespace,
    c: int,
) -> dict[str, Tally]:
    """Every lane, slice after slice, the order reversed every other slice."""
    lanes: list[tuple[str | None, Lane]] = [
        (name, http_lane(way, f"{g.base_url}/{way}/opensearch", g.proc.pid, c, args.credential))
        for name, g in gateways.items()
        for way in WAYS
    ]
    lanes += [(None, make(c)) for make in shared.values()]
    tallies = {name: Tally() for name in gateways}
    per = args.per_slice
    try:
        for _, lane in lanes:  # warm every lane
            await lane.slice(items[:per], 0, c)
        for s in range(args.slices):
            chunk = [items[(s * per + k) % len(items)] for k in range(per)]
            for name, lane in lanes if s % 2 == 0 else reversed(lanes):
                cpu, latencies, wall = await lane.slice(chunk, s * per, c)
                for owner in tallies if name is None else (name,):
                    tallies[owner].add(lane.way, cpu, latencies, wall)
    finally:
        for _, lane in lanes:
            await lane.close()
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
    if args.floor or args.direct:
        lines += ["", *budget_table(results, rng)]
    lines.append("")
    lines.append(
        f"{args.slices} slices x {args.per_slice} calls per way, gateway and concurrency "
        f"(BM25, limit 10, SciFact train queries; auth {args.auth}). "
        f"Run {time.strftime('%Y-%m-%d %H:%M %Z')} "
        f"on {machine.this_machine().describe()}; load average {load}."
    )
    return "\n".join(lines)


def budget_table(results: dict[int, dict[str, Tally]], rng: random.Random) -> list[str]:
    """Each gateway's A2M recall and each floor: CPU against the ``floor`` server, and p50
    and throughput against the engine searched directly, with 95 % intervals over the
    same slices. A floor is the same in every gateway's tally, so it is listed once."""
    lines = [
        "| server | concurrency | CPU ms/call | / floor | p50 ms | added p50 ms over direct "
        "| throughput / direct |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def cell(t: Tally, figure: Callable[[Picks], float], fmt: str) -> str:
        low, high = t.interval(rng, draws=1000, figure=figure)
        return f"{figure(None):{fmt}} ({low:{fmt}}..{high:{fmt}})"

    for c, tallies in results.items():
        rows = [(name, "a2m", t) for name, t in tallies.items()]
        first = next(iter(tallies.values()))
        rows += [(way, way, first) for way in FLOORS if way in first.calls]
        for name, way, t in rows:
            cpu = f"{t.per_call_ms(way):.3f}"
            versus = "-"
            if "floor" in t.cpu and way != "floor":
                versus = cell(t, partial(t.ratio, num=way, den="floor"), ".2f")
            p50 = f"{t.p50_ms(way):.2f}"
            added = share = "-"
            if "direct" in t.calls:
                added = cell(t, partial(t.added_p50_ms, way=way), "+.2f")
                share = cell(t, partial(t.throughput_ratio, way=way), ".2f")
            lines.append(f"| {name} | {c} | {cpu} | {versus} | {p50} | {added} | {share} |")
        if "direct" in first.calls:
            lines.append(f"| direct | {c} | - | - | {first.p50_ms('direct'):.2f} | - | - |")
    return lines


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
        auth, args.credential = auth_settings(args.auth)
        config = {
            "server": {"name": "a2m-bench", "auth": auth},
            "stores": {"opensearch": store_config("opensearch", args.opensearch_url, index)},
        }
        path = work / "gateway.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        pinned = os.environ.get("A2M_BENCH_GATEWAY_ROOT")
        roots = {f"root {pinned}" if pinned else "this tree": None}
        roots.update({f"root {r}": r for r in args.root})
        servers: list[GatewayProcess] = []
        gateways: dict[str, GatewayProcess] = {}
        try:
            for i, (name, root) in enumerate(roots.items()):
                gateways[name] = start_gateway(
                    path, work / f"data{i}", work / f"gw{i}.log", root=root
                )
                servers.append(gateways[name])
            shared: dict[str, Callable[[int], Lane]] = {}
            for way in args.floor or ():
                floor = start_floor(way, args.opensearch_url, index, work / f"{way}.log")
                servers.append(floor)
                shared[way] = partial(
                    http_lane, way, f"{floor.base_url}/a2m/opensearch", floor.proc.pid
                )
            if args.direct:
                shared["direct"] = lambda c: direct_lane(args.opensearch_url, index, c)
            results = {
                c: asyncio.run(measure(gateways, shared, items, args, c)) for c in args.concurrency
            }
        finally:
            for server in servers:
                stop_server(server.proc)
    if args.out:
        Path(args.out).write_text(json.dumps(as_json(results), indent=1))
    return report(results, args, f"{load_before} before, {machine.load_text()} after")


def auth_settings(kind: str) -> tuple[dict[str, object], dict[str, str]]:
    """``server.auth`` for `kind` and the header every gateway call then carries."""
    if kind == "none":
        return {}, {}
    import secrets

    from bench.auth_cost import hs256
    from gateway.security.auth import generate_api_key, hash_api_key

    api_key, secret = generate_api_key(), secrets.token_urlsafe(32)
    key = {"subject": "bench", "hash": hash_api_key(api_key)}
    auth: dict[str, object] = {"api_keys": [key]}
    if kind == "api-key":
        return auth, {"authorization": f"Bearer {api_key}"}

    auth["jwt"], token = hs256(secret)
    return auth, {"authorization": f"Bearer {token}"}


def as_json(results: dict[int, dict[str, Tally]]) -> dict[str, object]:
    """One row per gateway and concurrency: each slice's CPU seconds and calls per way, and
    with ``--floor`` / ``--direct`` its wall seconds and latencies too."""
    rows = []
    for c, tallies in results.items():
        for name, t in tallies.items():
            row: dict[str, object] = {
                "gateway": name,
                "concurrency": c,
                "cpu_s": {w: t.cpu[w] for w in WAYS},
                "calls": {w: t.calls[w] for w in WAYS},
                "ratio": t.ratio(),
            }
            for way in SHARED:
                if way in t.calls:
                    row[way] = {
                        "cpu_s": t.cpu.get(way),
                        "calls": t.calls[way],
                        "wall_s": t.wall[way],
                        "latencies_s": t.latencies[way],
                    }
            rows.append(row)
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
    p.add_argument(
        "--floor",
        nargs="*",
        choices=FLOORS,
        help="also the A2M recall sent to these floor servers (no name: the official client's)",
    )
    p.add_argument(
        "--direct", action="store_true", help="also the engine search sent straight to OpenSearch"
    )
    p.add_argument(
        "--auth",
        choices=["none", "api-key", "jwt"],
        default="none",
        help="authenticate every gateway call with an API key or an HS256 JWT",
    )
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--index", help="index name (default: the quality benchmark's)")
    p.add_argument("--out", help="write every slice's figures as JSON here")
    args = p.parse_args(argv)
    if args.floor == []:
        args.floor = ["floor"]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    print(run(parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
