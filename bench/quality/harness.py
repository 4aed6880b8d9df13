"""Retrieval quality through the gateway: BM25, dense and hybrid on each engine.

Loads a BEIR-layout collection into Elasticsearch, OpenSearch and Qdrant
through their own APIs, writes a gateway config with one store per engine,
starts a real ``a2m-gateway serve`` process, and sends every judged query as
A2M ``memory/recall`` over HTTP — exactly what an agent would send:

- bm25:   ``{"query": text, "limit": 100}``  (Qdrant: the lexical sparse leg)
- dense:  ``{"embedding": vector, "limit": 100}``
- hybrid: ``{"query": text, "embedding": vector, "limit": 100}``  (fused by search.fusion)
- dense-minilm, hybrid-minilm: ``{"query": text, "limit": 100}`` to a store in dense or
  hybrid mode whose ``embedder: {kind: minilm}`` embeds the text in the gateway (opt in:
  ``--modes dense dense-minilm hybrid hybrid-minilm``; needs the ``minilm`` extra)

and scores the answers with ir-measures: nDCG@10 and R@100.

    python -m bench.quality                       # SciFact train, all engines and modes
    python -m bench.quality --engines qdrant --modes bm25 --limit-queries 50
    python -m bench.quality --engines qdrant-server [--qdrant-grpc]   # the server of engines.py
    python -m bench.quality --corpus X/corpus.jsonl --queries X/queries.jsonl \\
        --qrels X/qrels/test.tsv --write-docs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import yaml

from bench import machine
from bench.process import start_gateway, stop_server
from bench.quality.collection import SCIFACT, Split, load_split, restrict
from bench.quality.engines import (
    ANALYZERS,
    ENGINES,
    SERVER_ENGINES,
    Loaded,
    Tuning,
    load_engines,
)
from bench.quality.evaluate import per_query
from bench.quality.recall import (
    EMBEDDED,
    LIMIT,
    MODES,
    gateway_config,
    recall_all,
    store_name,
)
from bench.quality.report import Cell, Report, chart, markdown


def tuning_of(args: argparse.Namespace) -> Tuning:
    return Tuning(
        text_fields=tuple(args.text_fields.split(",")),
        rrf_k=args.rrf_k,
        candidates=args.candidates,
        fusion=args.fusion,
    )


def new_report(args: argparse.Namespace, split: Split, tuning: Tuning) -> Report:
    """The report before any cell: the collection, the settings and the machine's load."""
    return Report(
        corpus=str(args.corpus),
        queries=str(args.queries),
        qrels=str(args.qrels),
        documents=len(split.sf.corpus_ids),
        evaluated_queries=len(split.query_ids),
        vectors=split.vectors_note,
        tuning=asdict(tuning),
        machine=machine.this_machine().describe(),
        load_before=machine.load_text(),
        load_after="",
        started=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        limit=args.limit,
    )


def score(base_url: str, item: Loaded, mode: str, split: Split, args: argparse.Namespace) -> Cell:
    """Every evaluated query of one mode through the engine's store, scored."""
    rankings, latencies, errors = asyncio.run(
        recall_all(
            base_url,
            store_name(item.engine, mode),
            mode,
            split,
            args.concurrency,
            args.limit,
        )
    )
    by_query = per_query(split.qrels, rankings, split.query_ids)
    scores = {m: statistics.fmean(v.values()) for m, v in by_query.items()}
    return Cell(
        engine=item.engine,
        mode=mode,
        queries=len(split.query_ids),
        errors=errors,
        ndcg10=scores["nDCG@10"],
        recall100=scores["R@100"],
        p50_ms=statistics.median(latencies) * 1000 if latencies else 0.0,
        empty=sum(1 for q in split.query_ids if not rankings.get(q)),
        version=item.version,
        analyzer=item.analyzer,
        ndcg10_by_query=by_query["nDCG@10"],
    )


def run(args: argparse.Namespace) -> Report:
    """Load, serve, query, evaluate. Raises SystemExit on a setup error."""
    engines = list(dict.fromkeys(args.engines))
    modes = list(dict.fromkeys(args.modes))
    tuning = tuning_of(args)
    split = load_split(
        Path(args.corpus),
        Path(args.queries),
        Path(args.qrels),
        limit_queries=args.limit_queries,
        need_vectors=any(m != "bm25" for m in modes),
        compute_vectors=args.embed,
    )
    if args.sample_docs is not None:
        split = restrict(split, args.sample_docs)
    report = new_report(args, split, tuning)
    with tempfile.TemporaryDirectory(prefix="a2m-quality-") as tmp:
        work = Path(tmp)
        loaded = load_engines(split, engines, args, work, tuning)
        for item in loaded:
            report.loads[item.engine] = f"{item.note} in {item.seconds:.1f} s"
            print(f"{item.engine}: {report.loads[item.engine]}", file=sys.stderr)
        config_path = work / "gateway.yaml"
        config_path.write_text(
            yaml.safe_dump(gateway_config(loaded, modes, args.minilm_weights), sort_keys=False)
        )
        server = start_gateway(config_path, work / "data", work / "gateway.log")
        try:
            for item in loaded:
                for mode in modes:
                    cell = score(server.base_url, item, mode, split, args)
                    report.cells.append(cell)
                    print(
                        f"{item.engine:13s} {mode:6s} nDCG@10 {cell.ndcg10:.4f}  "
                        f"R@100 {cell.recall100:.4f}  errors {cell.errors}",
                        file=sys.stderr,
                    )
        finally:
            stop_server(server.proc)
            if args.keep_log:
                Path(args.keep_log).write_bytes((work / "gateway.log").read_bytes())
    report.load_after = machine.load_text()
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _selection_options(p)
    _query_options(p)
    _lucene_options(p)
    p.add_argument("--out", help="write the report as JSON here")
    p.add_argument("--chart", help="write the PNG chart here")
    p.add_argument(
        "--write-docs",
        action="store_true",
        help="refresh the quality section of docs/benchmarks.md and docs/img/quality.png",
    )
    p.add_argument("--keep-log", help="copy the gateway's log here")
    p.add_argument(
        "--shape",
        nargs="+",
        choices=["long", "chunked", "whole", "nested"],
        help="long-document shapes instead of the corpus as is (bench.quality.long_run)",
    )
    p.add_argument("--k", type=int, default=3, help="--shape: records scored for evidence@k")
    args = p.parse_args(argv)
    if not 1 <= args.limit <= LIMIT:
        p.error(f"--limit must be 1..{LIMIT}")
    if args.limit_queries is not None and args.limit_queries < 1:
        p.error("--limit-queries must be positive")
    return args


def _selection_options(p: argparse.ArgumentParser) -> None:
    """The collection, engines, modes and queries a run covers."""
    p.add_argument("--corpus", default=str(SCIFACT / "corpus.jsonl"))
    p.add_argument("--queries", default=str(SCIFACT / "queries-train.jsonl"))
    p.add_argument("--qrels", default=str(SCIFACT / "qrels" / "train.tsv"))
    p.add_argument(
        "--engines", nargs="+", choices=[*ENGINES, *SERVER_ENGINES], default=list(ENGINES)
    )
    p.add_argument("--qdrant-url", default=os.environ.get("A2M_TEST_QDRANT_URL"))
    p.add_argument(
        "--qdrant-grpc-port", type=int, default=os.environ.get("A2M_TEST_QDRANT_GRPC_PORT")
    )
    p.add_argument("--qdrant-grpc", action="store_true", help="qdrant-server read over gRPC")
    p.add_argument("--modes", nargs="+", choices=[*MODES, *EMBEDDED], default=list(MODES))
    p.add_argument("--limit-queries", type=int, help="evaluate only the first N judged queries")
    p.add_argument(
        "--sample-docs",
        type=int,
        help="load only the judged documents of the evaluated queries plus N others (smoke runs)",
    )


def _query_options(p: argparse.ArgumentParser) -> None:
    """How the stores search and how each query is sent."""
    p.add_argument("--text-fields", default="title,text", help="ES/OS lexical fields, ^boosts ok")
    p.add_argument("--rrf-k", type=int, default=60)
    p.add_argument(
        "--fusion",
        choices=["zscore", "minmax", "dbsf", "rrf"],
        help="search.fusion of the stores (default: unset, the store's default)",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=LIMIT,
        help="results per call (default 100 for R@100; 10 to tune candidates as agents call)",
    )
    p.add_argument(
        "--candidates", type=int, help="search.candidates of the stores (default: unset)"
    )
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--embed", action="store_true", help="compute missing vectors (MiniLM)")
    p.add_argument(
        "--minilm-weights",
        choices=["auto", "int8", "fp32"],
        default="auto",
        help="the *-minilm modes' encoder (embedder.weights)",
    )


def _lucene_options(p: argparse.ArgumentParser) -> None:
    """Where Elasticsearch and OpenSearch are, and their indexes' name and analyzer."""
    p.add_argument("--elasticsearch-url", default=os.environ.get("A2M_TEST_ELASTICSEARCH_URL"))
    p.add_argument("--opensearch-url", default=os.environ.get("A2M_TEST_OPENSEARCH_URL"))
    p.add_argument("--index", help="ES/OS index name (default: derived from the corpus)")
    p.add_argument(
        "--opensearch-analyzer",
        default=ANALYZERS["opensearch"],
        help="analyzer of title/text on OpenSearch (english as BEIR's baseline; standard to "
        "compare with Elasticsearch, which has no english analyzer here)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.shape:
        return _main_long(args)
    report = run(args)
    table = markdown(report)
    print(table)
    if args.out:
        Path(args.out).write_text(json.dumps(asdict(report), indent=2) + "\n")
    chart_path = Path(args.chart) if args.chart else None
    if args.write_docs:
        from bench.docs import BENCHMARKS_MD, IMG_DIR, replace_section

        chart_path = chart_path or IMG_DIR / "quality.png"
        replace_section(BENCHMARKS_MD, "quality", table)
    if chart_path is not None:
        chart(report, chart_path)
    return 1 if any(c.errors for c in report.cells) else 0


def _main_long(args: argparse.Namespace) -> int:
    from bench.quality.long_score import markdown as long_markdown
    from bench.quality.long_score import report as long_report
    from bench.quality.long_score import run_long

    cells = run_long(args)
    print(long_markdown(cells))
    if args.out:
        Path(args.out).write_text(json.dumps(long_report(cells), indent=2) + "\n")
    return 1 if any(c.errors for c in cells) else 0
