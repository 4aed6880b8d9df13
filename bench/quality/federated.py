"""Federated recall against one index holding the whole corpus: quality and latency.

SciFact's corpus is split into three disjoint shards by a hash of the document
id: one loaded into Elasticsearch, one into OpenSearch, one into Qdrant (local
mode). A real ``a2m-gateway serve`` federates them (equal weights, ``--fusion``,
default ``shards``; rrf_k 60)
and also serves the whole corpus on single indexes (the baselines). Every
judged query goes through ``POST /a2m/<store>`` in each mode:

- bm25:   ``{"query": text, "limit": 100}``
- dense:  ``{"embedding": vector, "limit": 100}``
- hybrid: ``{"query": text, "embedding": vector, "limit": 100}``

and is scored with nDCG@10 and R@100. Latency is per call, one call at a time
by default, for the federation and for each member alone.

    python -m bench.quality.federated                      # SciFact train split
    python -m bench.quality.federated --write-docs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bench import machine
from bench.process import start_gateway, stop_server
from bench.quality.collection import SCIFACT, Split, load_split, restrict, subset_split
from bench.quality.engines import Loaded, Tuning, load_lucene, load_qdrant
from bench.quality.evaluate import evaluate
from bench.quality.recall import MODES, recall_all

SHARDS = {"es": "elasticsearch", "os": "opensearch", "qd": "qdrant"}
FEDERATION = "federated"


def shard_of(doc_id: str) -> str:
    return list(SHARDS)[zlib.crc32(f"shard/{doc_id}".encode()) % len(SHARDS)]


@dataclass
class Row:
    store: str
    mode: str
    ndcg10: float
    recall100: float
    p50_ms: float
    p99_ms: float
    errors: int


def _p(latencies: list[float], q: float) -> float:
    if not latencies:
        return 0.0
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _load(engine: str, split: Split, index: str, work: Path, args: argparse.Namespace) -> Loaded:
    tuning = Tuning()
    if engine == "qdrant":
        return load_qdrant(work / index, split, tuning)
    url = args.elasticsearch_url if engine == "elasticsearch" else args.opensearch_url
    if not url:
        raise SystemExit(f'no URL for {engine}: eval "$(python tests/engines/engines.py env)"')
    # standard on both Lucene engines: the shards and the whole index must tokenise alike
    # (Elasticsearch's test node has no english analyzer), as when docs/benchmarks.md was measured.
    return load_lucene(engine, url, index, split, tuning, "standard")


def load_stores(
    args: argparse.Namespace, split: Split, work: Path
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each shard loaded into its engine and the whole corpus into each ``--whole`` engine:
    the gateway's stores, and what each shard holds."""
    fp = split.fingerprint()
    n = len(split.sf.corpus_ids)
    stores: dict[str, dict[str, Any]] = {}
    notes = []
    for name, engine in SHARDS.items():
        ids = [d for d in split.sf.corpus_ids if shard_of(d) == name]
        shard = subset_split(split, ids)
        loaded = _load(engine, shard, f"a2m-bench-fed-{fp}-{name}-{len(ids)}", work, args)
        stores[name] = loaded.store
        notes.append(f"{name} ({engine}): {len(ids)} docs")
    for engine in args.whole:
        loaded = _load(engine, split, f"a2m-bench-{fp}-{n}", work, args)
        stores[f"whole-{engine}"] = loaded.store
    return stores, notes


def gateway_config(stores: dict[str, dict[str, Any]], fusion: str) -> dict[str, Any]:
    """The stores, and the shards federated as one."""
    return {
        "server": {"name": "a2m-bench", "request_timeout_ms": 60_000, "log_level": "warning"},
        "stores": stores,
        "federations": {
            FEDERATION: {
                "members": list(SHARDS),
                "deadline_ms": 60_000,
                "fusion": fusion,
            }
        },
    }


def score(base_url: str, store: str, mode: str, split: Split, concurrency: int) -> Row:
    """Every evaluated query of one mode through one store (or the federation), scored."""
    rankings, latencies, errors = asyncio.run(recall_all(base_url, store, mode, split, concurrency))
    scores = evaluate(split.qrels, rankings, split.query_ids)
    return Row(
        store,
        mode,
        scores["nDCG@10"],
        scores["R@100"],
        statistics.median(latencies) * 1000 if latencies else 0.0,
        _p(latencies, 0.99),
        errors,
    )


def run(args: argparse.Namespace) -> tuple[list[Row], str]:
    split = load_split(
        Path(args.corpus), Path(args.queries), Path(args.qrels), limit_queries=args.limit_queries
    )
    if args.sample_docs is not None:
        split = restrict(split, args.sample_docs)
    n = len(split.sf.corpus_ids)
    with tempfile.TemporaryDirectory(prefix="a2m-federated-") as tmp:
        work = Path(tmp)
        stores, notes = load_stores(args, split, work)
        path = work / "gateway.yaml"
        path.write_text(yaml.safe_dump(gateway_config(stores, args.fusion), sort_keys=False))
        server = start_gateway(path, work / "data", work / "gateway.log")
        rows: list[Row] = []
        try:
            for mode in args.modes:
                for store in [FEDERATION, *SHARDS, *(f"whole-{e}" for e in args.whole)]:
                    if args.only_federation and store != FEDERATION:
                        continue
                    row = score(server.base_url, store, mode, split, args.concurrency)
                    rows.append(row)
                    print(
                        f"{store:20s} {mode:6s} nDCG@10 {row.ndcg10:.4f} R@100 "
                        f"{row.recall100:.4f} p50 {row.p50_ms:.1f} p99 {row.p99_ms:.1f} "
                        f"errors {row.errors}",
                        file=sys.stderr,
                    )
        finally:
            stop_server(server.proc)
    note = (
        f"{n} documents in three shards ({', '.join(notes)}); "
        f"{len(split.query_ids)} judged queries (`{Path(args.queries).name}`, "
        f"`{Path(args.qrels).name}`); limit 100; equal weights, fusion {args.fusion}, rrf_k 60; "
        f"concurrency {args.concurrency}. Run {time.strftime('%Y-%m-%d %H:%M %Z')} on "
        f"{machine.this_machine().describe()}, load average {machine.load_text()} after."
    )
    return rows, note


def markdown(rows: list[Row], note: str, whole: Sequence[str]) -> str:
    by = {(r.store, r.mode): r for r in rows}
    lines = [
        "| mode | store | nDCG@10 | R@100 | Δ nDCG@10 vs whole | p50 ms | p99 ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode in dict.fromkeys(r.mode for r in rows):
        fed = by[(FEDERATION, mode)]
        for store in [FEDERATION, *(f"whole-{e}" for e in whole), *SHARDS]:
            r = by.get((store, mode))
            if r is None:
                continue
            delta = "" if store == FEDERATION else f"{fed.ndcg10 - r.ndcg10:+.3f}"
            if store in SHARDS:
                delta = "(one shard)"
            lines.append(
                f"| {mode} | {store} | {r.ndcg10:.3f} | {r.recall100:.3f} | {delta} | "
                f"{r.p50_ms:.1f} | {r.p99_ms:.1f} |"
            )
        slowest = max((by[(s, mode)] for s in SHARDS), key=lambda r: r.p50_ms)
        lines.append(
            f"| {mode} | federated vs slowest member ({slowest.store}) | | | | "
            f"{fed.p50_ms / slowest.p50_ms:.2f}x | {fed.p99_ms / slowest.p99_ms:.2f}x |"
        )
    lines += ["", note]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    import os

    p = argparse.ArgumentParser(prog="python -m bench.quality.federated", description=__doc__)
    p.add_argument("--corpus", default=str(SCIFACT / "corpus.jsonl"))
    p.add_argument("--queries", default=str(SCIFACT / "queries-train.jsonl"))
    p.add_argument("--qrels", default=str(SCIFACT / "qrels" / "train.tsv"))
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument(
        "--whole",
        nargs="*",
        choices=list(SHARDS.values()),
        default=["elasticsearch", "opensearch"],
        help="engines that also serve the whole corpus on one index (the baselines)",
    )
    p.add_argument("--fusion", choices=["rrf", "score", "shards"], default="shards")
    p.add_argument(
        "--only-federation", action="store_true", help="query the federation only (no table)"
    )
    p.add_argument("--limit-queries", type=int)
    p.add_argument(
        "--sample-docs",
        type=int,
        help="load only the judged documents of the evaluated queries plus N others (smoke runs)",
    )
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--elasticsearch-url", default=os.environ.get("A2M_TEST_ELASTICSEARCH_URL"))
    p.add_argument("--opensearch-url", default=os.environ.get("A2M_TEST_OPENSEARCH_URL"))
    p.add_argument("--write-docs", action="store_true", help="refresh docs/benchmarks.md")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows, note = run(args)
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": [asdict(r) for r in rows], "note": note}))
    if args.only_federation:
        return 1 if any(r.errors for r in rows) else 0
    table = markdown(rows, note, args.whole)
    print(table)
    if args.write_docs:
        from bench.docs import BENCHMARKS_MD, replace_section

        replace_section(BENCHMARKS_MD, "federation", table)
    return 1 if any(r.errors for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
