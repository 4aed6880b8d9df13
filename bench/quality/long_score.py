"""Scores of one long-document cell, and the run over every shape (bench.quality.long_run)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from bench.process import start_gateway, stop_server
from bench.quality.collection import Split, load_split
from bench.quality.long_docs import Shapes, build
from bench.quality.long_run import (
    LongCell,
    doc_ndcg,
    has_evidence,
    load_stores,
    process_cpu_s,
    recall_shape,
    runs_of,
)

WARM_UP = 20
"""Recalls each store answers, unmeasured, before its cell: the same warm start for each."""


def score_cell(
    answers: dict[str, list[dict[str, Any]]], split: Split, shapes: Shapes, shape: str, k: int
) -> dict[str, float | int]:
    """evidence@k, characters per query and per record (first k), document nDCG@10."""
    evidence = chars = records = max_chars = 0
    ndcgs: list[float] = []
    for qid in split.query_ids:
        relevant = [d for d, g in split.qrels[qid].items() if g > 0 and d in shapes.sections]
        runs = [runs_of(shapes.sections[d]) for d in relevant]
        got = answers.get(qid, [])
        top = [r.get("content", "") for r in got[:k]]
        evidence += any(has_evidence(c, runs) for c in top)
        chars += sum(len(c) for c in top)
        records += len(top)
        max_chars = max([max_chars, *(len(c) for c in top)])
        gains: dict[int, int] = {}
        for d in relevant:
            doc = shapes.doc_of[d]
            gains[doc] = max(gains.get(doc, 0), split.qrels[qid][d])
        docs: list[int] = []
        for r in got:
            rid = r["key"].split("/", 1)[1]
            doc = shapes.doc_of[rid] if shape == "chunked" else int(rid)
            if doc not in docs:
                docs.append(doc)
        ndcgs.append(doc_ndcg(docs, gains))
    n = len(split.query_ids)
    return {
        "evidence_at_k": evidence / n,
        "chars_per_query": chars / n,
        "chars_per_record": chars / records if records else 0.0,
        "max_record_chars": max_chars,
        "doc_ndcg10": statistics.fmean(ndcgs),
    }


def run_long(args: argparse.Namespace) -> list[LongCell]:
    """Load the shapes, serve one gateway, run every (engine, mode, shape, stage) cell."""
    split = load_split(
        Path(args.corpus),
        Path(args.queries),
        Path(args.qrels),
        limit_queries=args.limit_queries,
        compute_vectors=args.embed,
    )
    shapes = build(split.sf)
    warm_up = dataclasses.replace(split, query_ids=split.query_ids[:WARM_UP])
    wanted = list(dict.fromkeys(args.shape))
    engines = [e for e in dict.fromkeys(args.engines) if e != "qdrant-server"]
    cells: list[LongCell] = []
    with tempfile.TemporaryDirectory(prefix="a2m-long-") as tmp:
        work = Path(tmp)
        stores = load_stores(shapes, wanted, engines, args, work)
        names = {key: "-".join(key).replace("=", "").replace(" ", "-") for key in stores}
        config = {
            "server": {"name": "a2m-bench", "request_timeout_ms": 60_000, "log_level": "warning"},
            "stores": {names[key]: section for key, section in stores.items()},
        }
        (work / "gateway.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        server = start_gateway(work / "gateway.yaml", work / "data", work / "gateway.log")
        try:
            for (engine, shape, stage), name in names.items():
                for mode in dict.fromkeys(args.modes):
                    # Unmeasured first: the store's first recalls open its shard or
                    # connections and fill caches, which the cell before it did not pay.
                    asyncio.run(
                        recall_shape(server.base_url, name, mode, warm_up, args.concurrency)
                    )
                    cpu = process_cpu_s(server.proc.pid)
                    answers, latencies, errors = asyncio.run(
                        recall_shape(server.base_url, name, mode, split, args.concurrency)
                    )
                    cpu = process_cpu_s(server.proc.pid) - cpu
                    scores = score_cell(answers, split, shapes, shape, args.k)
                    cell = LongCell(
                        engine=engine,
                        mode=mode,
                        shape=shape,
                        stage=stage,
                        queries=len(split.query_ids),
                        errors=errors,
                        cpu_ms_per_recall=cpu * 1000 / max(len(latencies), 1),
                        p50_ms=statistics.median(latencies) * 1000 if latencies else 0.0,
                        **scores,  # type: ignore[arg-type]
                    )
                    cells.append(cell)
                    print(table_row(cell), file=sys.stderr)
        finally:
            stop_server(server.proc)
    return cells


HEADER = (
    "| engine | mode | shape | stage | evidence@3 | chars/query | chars/record | "
    "doc nDCG@10 | gateway CPU ms/recall |\n|---|---|---|---|---|---|---|---|---|"
)


def table_row(c: LongCell) -> str:
    return (
        f"| {c.engine} | {c.mode} | {c.shape} | {c.stage} | {c.evidence_at_k:.3f} | "
        f"{c.chars_per_query:.0f} | {c.chars_per_record:.0f} | {c.doc_ndcg10:.4f} | "
        f"{c.cpu_ms_per_recall:.2f} |"
    )


def markdown(cells: list[LongCell]) -> str:
    return "\n".join([HEADER, *(table_row(c) for c in cells)])


def report(cells: list[LongCell]) -> dict[str, Any]:
    """``--out`` JSON: engine -> mode -> shape -> stage -> measures."""
    out: dict[str, Any] = {}
    for c in cells:
        measures = {
            k: v for k, v in asdict(c).items() if k not in ("engine", "mode", "shape", "stage")
        }
        out.setdefault(c.engine, {}).setdefault(c.mode, {}).setdefault(c.shape, {})[c.stage] = (
            measures
        )
    return out
