"""Cost on a Qdrant server: qdrant-client direct vs A2M recall through the gateway, REST and gRPC.

    eval "$(python tests/engines/engines.py env)"   # the server of tests/engines/engines.py
    python -m bench.qdrant_cost [--requests 200] [--concurrency 1 8] [--rounds 2]

The SciFact subset of the test suite (1,080 points, ``a2m-test-scifact``) is
(re)loaded into the server. Each request is one train query's text, 10 results:

- **direct-rest / direct-grpc**: ``AsyncQdrantClient.query_points`` on the sparse
  vector with the query's lexical encoding, payload limited to the mapped fields
  (what the connector sends);
- **gateway-rest / gateway-grpc**: ``memory/recall {"query": text, "limit": 10}``
  over HTTP to ``a2m-gateway serve`` with one lexical store per protocol (the
  gateway encodes the text itself).

Ways are interleaved per round. CPU ms/request is read from ``/proc/<pid>/stat``
of the gateway process and of the Qdrant server around each block; the load
generator is one process sharing the machine's cores with both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.machine import cpu_seconds
from bench.process import start_gateway, stop_server
from connectors.qdrant.sparse import LexicalSparseEncoder
from tests.support.scifact import SPARSE, documents, load_qdrant, load_scifact, subset

COLLECTION = "a2m-test-scifact"
WAYS = ("direct-rest", "direct-grpc", "gateway-rest", "gateway-grpc")
FIELDS = ["content", "key", "title"]

Call = Callable[[str], Awaitable[None]]


def store(url: str, grpc_port: int | None) -> dict[str, Any]:
    conn: dict[str, Any] = {"url": url, "api_key": "${A2M_TEST_QDRANT_API_KEY}", "pool_maxsize": 64}
    if grpc_port is not None:
        conn.update(prefer_grpc=True, grpc_port=grpc_port)
    return {
        "backend": "qdrant",
        "index": COLLECTION,
        "connection": conn,
        "mapping": {"content": "content", "key": "key", "metadata": ["title"]},
        "search": {"mode": "lexical", "sparse_vector": SPARSE},
    }


async def drive(texts: list[str], concurrency: int, call: Call) -> list[float]:
    """Send every text with ``concurrency`` in flight; the latency of each, in ms."""
    queue = list(enumerate(texts))
    took: list[float] = []

    async def worker() -> None:
        while queue:
            _, text = queue.pop()
            started = time.perf_counter()
            await call(text)
            took.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return took


def cpu(pid: int | None) -> float:
    value = cpu_seconds(pid) if pid is not None else None
    return value or 0.0


def caller(
    way: str,
    clients: dict[str, Any],
    encoder: LexicalSparseEncoder,
    http: httpx.AsyncClient,
    base_url: str,
) -> Call:
    """The way's call: qdrant-client's sparse query (direct-*), or A2M recall to the
    gateway's store of that protocol (gateway-*)."""
    if way.startswith("direct"):
        from qdrant_client import models

        client = clients[way]

        async def direct(text: str) -> None:
            sv = encoder.encode_query(text)
            vector = models.SparseVector(indices=list(sv.indices), values=list(sv.values))
            await client.query_points(
                COLLECTION, query=vector, using=SPARSE, limit=10, with_payload=FIELDS
            )

        return direct
    endpoint = f"{base_url}/a2m/{way.split('-')[1]}"

    async def recall(text: str) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "memory/recall",
            "params": {"query": text, "limit": 10},
        }
        answer = (await http.post(endpoint, json=body)).json()
        if "result" not in answer:
            raise RuntimeError(f"{way}: {answer}")

    return recall


async def measure(
    way: str,
    concurrency: int,
    texts: list[str],
    call: Call,
    gateway_pid: int,
    engine_pid: int | None,
) -> dict[str, Any]:
    """One block: latencies, throughput, and the gateway's and the engine's CPU per request."""
    load = os.getloadavg()[0]
    g0, e0 = cpu(gateway_pid), cpu(engine_pid)
    started = time.perf_counter()
    took = await drive(texts, concurrency, call)
    wall = time.perf_counter() - started
    g1, e1 = cpu(gateway_pid), cpu(engine_pid)
    n = len(took)
    return {
        "way": way,
        "concurrency": concurrency,
        "p50": statistics.median(took),
        "p99": sorted(took)[min(n - 1, int(n * 0.99))],
        "rps": n / wall,
        "gateway_cpu": (g1 - g0) * 1000 / n if way.startswith("gateway") else None,
        "engine_cpu": (e1 - e0) * 1000 / n if engine_pid else None,
        "load": load,
        "n": n,
    }


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from qdrant_client import AsyncQdrantClient

    url, key = os.environ["A2M_TEST_QDRANT_URL"], os.environ["A2M_TEST_QDRANT_API_KEY"]
    grpc_port = int(os.environ["A2M_TEST_QDRANT_GRPC_PORT"])
    sf = load_scifact(Path(args.scifact))
    _, dids = subset(sf, n_queries=100, n_others=1000)
    server: dict[str, Any] = {
        "url": url,
        "api_key": key,
        "timeout": 120,
        "check_compatibility": False,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
        load_qdrant("", sf, dids, collection=COLLECTION, server=server)
        clients = {
            "direct-rest": AsyncQdrantClient(**server),
            "direct-grpc": AsyncQdrantClient(**server, prefer_grpc=True, grpc_port=grpc_port),
        }
    docs = documents(sf, dids)
    encoder = LexicalSparseEncoder(
        avgdl=LexicalSparseEncoder.average_length(d["content"] for d in docs)
    )
    texts = [sf.queries[q] for q in sf.query_ids][: args.requests]
    work = Path(tempfile.mkdtemp(prefix="a2m-qdrant-cost-"))
    config = work / "gateway.yaml"
    stores = {"rest": store(url, None), "grpc": store(url, grpc_port)}
    config.write_text(yaml.safe_dump({"server": {"log_level": "warning"}, "stores": stores}))
    gateway = start_gateway(config, work / "data", work / "gateway.log")
    engine_pid = int(args.qdrant_pid) if args.qdrant_pid else None
    http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64))
    rows: list[dict[str, Any]] = []
    try:
        for rnd in range(args.rounds):
            ways = WAYS if rnd % 2 == 0 else tuple(reversed(WAYS))
            for c in args.concurrency:
                for way in ways:
                    call = caller(way, clients, encoder, http, gateway.base_url)
                    rows.append(await measure(way, c, texts, call, gateway.proc.pid, engine_pid))
                    print(rows[-1], file=sys.stderr)
    finally:
        await http.aclose()
        for client in clients.values():
            await client.close()
        stop_server(gateway.proc)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| way | concurrency | p50 ms | p99 ms | req/s | CPU ms/req gateway "
        "| CPU ms/req qdrant | requests | load (1 min) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    keys = sorted({(r["concurrency"], r["way"]) for r in rows})
    for c, way in keys:
        block = [r for r in rows if r["way"] == way and r["concurrency"] == c]

        def med(name: str, rs: list[dict[str, Any]] = block) -> str:
            values = [r[name] for r in rs if r[name] is not None]
            return f"{statistics.median(values):.2f}" if values else "-"

        n = sum(r["n"] for r in block)
        out.append(
            f"| {way} | {c} | {med('p50')} | {med('p99')} | {med('rps')} | "
            f"{med('gateway_cpu')} | {med('engine_cpu')} | {n} | {med('load')} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.qdrant_cost", description=__doc__)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--qdrant-pid", help="the server's pid, for its CPU (engines.py state)")
    p.add_argument(
        "--scifact",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"),
    )
    args = p.parse_args(argv)
    print(table(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
