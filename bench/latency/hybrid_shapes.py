"""Engine CPU per hybrid call for each way to shape it, sent straight to one node.

No gateway: the engine's own client sends the bodies the connector would, so
the figure is the engine's work alone (CPU seconds of the node's process from
/proc, divided by calls). Use a private node no one else queries. Shapes:

- ``lexical``: one ``_search``, 10 hits with their mapped ``_source`` (the baseline);
- ``three-trips``: id-only lexical and kNN legs ``depth`` deep, then a re-read of 10
  ids (the older connector shape);
- ``msearch+reread``: the two id-only legs in one ``_msearch``, then the re-read (2 trips);
- ``msearch-sources``: the two legs in one ``_msearch``, each returning ``_source``
  (mapped fields only) for its ``depth`` hits (1 trip).

    python -m bench.latency.hybrid_shapes --engine opensearch --url http://127.0.0.1:PORT \\
        --depths 10 20 30 50 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bench import machine
from bench.latency.hybrid import node_pid
from bench.quality.collection import SCIFACT, load_split
from tests.support import lucene_loader

SOURCE = {"includes": ["text", "key", "title"]}
FIELDS = ["title", "text"]
LIMIT = 10


def _lexical(text: str, size: int, source: Any) -> dict[str, Any]:
    query = {"multi_match": {"query": text, "fields": FIELDS, "type": "best_fields"}}
    return {"size": size, "_source": source, "track_total_hits": False, "query": query}


def _knn(engine: str, vector: list[float], size: int, source: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"size": size, "_source": source, "track_total_hits": False}
    if engine == "elasticsearch":
        body["knn"] = {
            "field": "embedding",
            "query_vector": vector,
            "k": size,
            "num_candidates": size,
        }
    else:
        body["query"] = {"knn": {"embedding": {"vector": vector, "k": size}}}
    return body


def _ids(response: dict[str, Any]) -> list[str]:
    return [h["_id"] for h in response["hits"]["hits"]]


def _reread(ids: Sequence[str]) -> dict[str, Any]:
    return {"size": len(ids), "_source": SOURCE, "query": {"ids": {"values": list(ids)}}}


Shape = Callable[[Any, str, list[float], int], Awaitable[None]]


def shapes(engine: str, index: str) -> dict[str, Shape]:
    async def search(client: Any, body: dict[str, Any]) -> dict[str, Any]:
        r = await client.search(index=index, body=body)
        return dict(r.body if hasattr(r, "body") else r)

    async def msearch(client: Any, bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for b in bodies:
            lines += [{}, b]
        if engine == "elasticsearch":
            r = await client.msearch(index=index, searches=lines)
            return list(r.body["responses"])
        return list((await client.msearch(index=index, body=lines))["responses"])

    async def lexical(client: Any, text: str, vector: list[float], depth: int) -> None:
        await search(client, _lexical(text, LIMIT, SOURCE))

    async def three(client: Any, text: str, vector: list[float], depth: int) -> None:
        a, b = await asyncio.gather(
            search(client, _lexical(text, depth, False)),
            search(client, _knn(engine, vector, depth, False)),
        )
        await search(client, _reread((_ids(a) + _ids(b))[:LIMIT]))

    async def two(client: Any, text: str, vector: list[float], depth: int) -> None:
        a, b = await msearch(
            client, [_lexical(text, depth, False), _knn(engine, vector, depth, False)]
        )
        await search(client, _reread((_ids(a) + _ids(b))[:LIMIT]))

    async def one(client: Any, text: str, vector: list[float], depth: int) -> None:
        await msearch(client, [_lexical(text, depth, SOURCE), _knn(engine, vector, depth, SOURCE)])

    return {"lexical": lexical, "three-trips": three, "msearch+reread": two, "msearch-sources": one}


def _client(engine: str, url: str) -> Any:
    if engine == "elasticsearch":
        from elasticsearch import AsyncElasticsearch

        return AsyncElasticsearch(url, request_timeout=60)
    from opensearchpy import AsyncOpenSearch

    return AsyncOpenSearch(hosts=[url], timeout=60)


async def _block(
    shape: Shape, client: Any, items: Sequence[tuple[str, list[float]]], depth: int, c: int
) -> None:
    queue = list(items)

    async def worker() -> None:
        while queue:
            text, vector = queue.pop()
            await shape(client, text, vector, depth)

    await asyncio.gather(*(worker() for _ in range(c)))


async def measure(args: argparse.Namespace) -> None:
    split = load_split(Path(args.corpus), Path(args.queries), Path(args.qrels))
    index = args.index or f"a2m-bench-{split.fingerprint()}-{len(split.sf.corpus_ids)}"
    lucene_loader.load_index(args.engine, args.url, index, split.sf)
    rng = random.Random(args.seed)
    qids = [rng.choice(list(split.query_ids)) for _ in range(args.requests)]
    items = [(split.sf.queries[q], split.sf.query_vector(q)) for q in qids]
    pid = node_pid(args.url)
    if pid is None:
        raise SystemExit("the node does not run on this machine: no CPU figure")
    client = _client(args.engine, args.url)
    table = shapes(args.engine, index)
    results: dict[tuple[str, int], list[float]] = {}
    try:
        for name in table:  # warm-up: the JIT, the caches
            await _block(table[name], client, items[:50], 100, args.concurrency)
        for rnd in range(args.rounds):
            for depth in args.depths:
                names = list(table) if rnd % 2 == 0 else list(reversed(table))
                for name in names:
                    if name == "lexical" and depth != args.depths[0]:
                        continue
                    before = machine.cpu_seconds(pid) or 0.0
                    start = time.perf_counter()
                    await _block(table[name], client, items, depth, args.concurrency)
                    wall = time.perf_counter() - start
                    cpu_ms = 1000 * ((machine.cpu_seconds(pid) or 0.0) - before) / len(items)
                    results.setdefault((name, depth), []).append(cpu_ms)
                    print(
                        f"round {rnd} depth {depth:4d} {name:16s} engine {cpu_ms:6.2f} ms "
                        f"CPU/call {len(items) / wall:6.1f} calls/s load "
                        f"{machine.load_average()[0]:.2f}",
                        file=sys.stderr,
                    )
    finally:
        await client.close()
    base = min(results[("lexical", args.depths[0])])
    print(f"| engine | shape | depth | engine CPU ms/call (min over {args.rounds}) | x lexical |")
    print("| --- | --- | ---: | ---: | ---: |")
    print(f"| {args.engine} | lexical | - | {base:.2f} | 1.00 |")
    for (name, depth), values in results.items():
        if name != "lexical":
            best = min(values)
            print(f"| {args.engine} | {name} | {depth} | {best:.2f} | {best / base:.2f} |")
    print(f"\nload average (1/5/15 min) after: {machine.load_text()}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.latency.hybrid_shapes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--engine", choices=["opensearch", "elasticsearch"], required=True)
    p.add_argument("--url", help="a private node (default: A2M_TEST_<ENGINE>_URL)")
    p.add_argument("--depths", nargs="+", type=int, default=[10, 20, 30, 50, 100])
    p.add_argument("--requests", "-n", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--index")
    p.add_argument("--corpus", default=str(SCIFACT / "corpus.jsonl"))
    p.add_argument("--queries", default=str(SCIFACT / "queries-train.jsonl"))
    p.add_argument("--qrels", default=str(SCIFACT / "qrels" / "train.tsv"))
    args = p.parse_args(argv)
    args.url = args.url or os.environ.get(f"A2M_TEST_{args.engine.upper()}_URL")
    if not args.url:
        p.error("no node URL: pass --url or set A2M_TEST_<ENGINE>_URL")
    asyncio.run(measure(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
