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
import copy
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from bench import machine
from bench.process import start_gateway, stop_server
from bench.quality.collection import Split, load_split
from bench.quality.engines import (
    ANALYZERS,
    ENGINES,
    SERVER_ENGINES,
    Loaded,
    Tuning,
    doc_id_of,
    load_lucene,
    load_qdrant,
    load_qdrant_server,
)
from bench.quality.evaluate import MEASURES, per_query

MODES = ("bm25", "dense", "hybrid")
EMBEDDED = {"dense-minilm": "dense", "hybrid-minilm": "hybrid"}
"""Modes whose query text the gateway embeds (kind minilm), and the store mode each uses."""
LIMIT = 100
SCIFACT = Path(
    os.environ.get(
        "A2M_SCIFACT_DIR", Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact"
    )
)
# nDCG@10 on SciFact's train split measured with these exact files (its README).
TRAIN_REFERENCE = {"bm25": 0.698, "dense": 0.660, "hybrid": 0.721}
BEIR_BM25_TEST = 0.665


@dataclass
class Cell:
    """One engine x mode."""

    engine: str
    mode: str
    queries: int
    errors: int
    ndcg10: float
    recall100: float
    p50_ms: float
    empty: int
    version: str = ""
    analyzer: str = ""
    ndcg10_by_query: dict[str, float] = field(default_factory=dict)
    """Each query's nDCG@10, for paired comparisons (``python -m bench.quality.compare``)."""


@dataclass
class Report:
    corpus: str
    queries: str
    qrels: str
    documents: int
    evaluated_queries: int
    vectors: str
    tuning: dict[str, Any]
    machine: str
    load_before: str
    load_after: str
    started: str
    loads: dict[str, str] = field(default_factory=dict)
    cells: list[Cell] = field(default_factory=list)
    limit: int = LIMIT
    """Results asked per call (R@100 needs 100; tuning ``candidates`` needs an agent's 10)."""


def mode_params(mode: str, text: str, vector: list[float], limit: int = LIMIT) -> dict[str, Any]:
    if mode == "bm25" or mode in EMBEDDED:
        return {"query": text, "limit": limit}
    if mode == "dense":
        return {"embedding": vector, "limit": limit}
    return {"query": text, "embedding": vector, "limit": limit}


async def recall_all(
    base_url: str,
    store: str,
    mode: str,
    split: Split,
    concurrency: int,
    limit: int = LIMIT,
) -> tuple[dict[str, list[str]], list[float], int]:
    """Every evaluated query through POST /a2m/<store>: rankings, latencies, error count."""
    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[str] = asyncio.Queue()
    for qid in split.query_ids:
        queue.put_nowait(qid)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0, limits=limits) as http:

        async def worker() -> None:
            nonlocal errors
            while True:
                try:
                    qid = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                params = mode_params(mode, split.sf.queries[qid], split.sf.query_vector(qid), limit)
                body = {"jsonrpc": "2.0", "id": qid, "method": "memory/recall", "params": params}
                start = time.perf_counter()
                try:
                    r = await http.post(f"/a2m/{store}", json=body)
                    answer = r.json()
                except (httpx.HTTPError, ValueError):
                    answer = {}
                latencies.append(time.perf_counter() - start)
                if "result" not in answer:
                    errors += 1
                    continue
                rankings[qid] = [doc_id_of(rec) for rec in answer["result"]["records"]]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return rankings, latencies, errors


def restrict(split: Split, others: int) -> Split:
    """The judged documents of the evaluated queries plus ``others`` unjudged ones."""
    sf = split.sf
    keep = {d for q in split.query_ids for d in split.qrels[q] if d in sf._doc_row}
    extra = [d for d in sf.corpus_ids if d not in keep][:others]
    return subset_split(split, [d for d in sf.corpus_ids if d in keep] + extra)


def subset_split(split: Split, ids: Sequence[str]) -> Split:
    """The split with only these documents (their vectors kept), queries unchanged."""
    sf = split.sf
    rows = [sf._doc_row[d] for d in ids]
    vectors = np.asarray(sf.corpus_vectors)[rows]
    new_sf = type(sf)(
        titles=sf.titles,
        texts=sf.texts,
        corpus_ids=list(ids),
        queries=sf.queries,
        query_ids=sf.query_ids,
        qrels=sf.qrels,
        corpus_vectors=vectors,
        query_vectors=sf.query_vectors,
        _doc_row={d: i for i, d in enumerate(ids)},
        _query_row=sf._query_row,
    )
    return Split(new_sf, split.qrels, split.query_ids, split.corpus_path, split.vectors_note)


def load_engines(
    split: Split, engines: Sequence[str], args: argparse.Namespace, work: Path, tuning: Tuning
) -> list[Loaded]:
    """Load each selected engine; the index name carries the corpus fingerprint and size."""
    loaded: list[Loaded] = []
    index = args.index or f"a2m-bench-{split.fingerprint()}-{len(split.sf.corpus_ids)}"
    for engine in engines:
        if engine == "qdrant":
            loaded.append(load_qdrant(work / "qdrant", split, tuning))
            continue
        if engine == "qdrant-server":
            if not args.qdrant_url:
                raise SystemExit("no URL for qdrant-server: pass --qdrant-url or start it")
            grpc_port = args.qdrant_grpc_port if args.qdrant_grpc else None
            loaded.append(load_qdrant_server(args.qdrant_url, split, tuning, grpc_port=grpc_port))
            continue
        url = args.elasticsearch_url if engine == "elasticsearch" else args.opensearch_url
        if not url:
            raise SystemExit(
                f"no URL for {engine}: pass --{engine}-url or start the engines "
                '(python tests/engines/engines.py start; eval "$(... env)")'
            )
        analyzer = args.opensearch_analyzer if engine == "opensearch" else ANALYZERS[engine]
        # The analyzer is in the name: a standard and an english index never get mixed up.
        name = index if analyzer == "standard" else f"{index}-{analyzer}"
        loaded.append(load_lucene(engine, url, name, split, tuning, analyzer))
    return loaded


def store_name(engine: str, mode: str) -> str:
    return f"{engine}-{mode}" if mode in EMBEDDED else engine


def gateway_config(
    loaded: Sequence[Loaded], modes: Sequence[str] = (), weights: str = "auto"
) -> dict[str, Any]:
    """One store per engine, plus one per embedded mode (Qdrant: on a copy of its directory,
    since local mode locks a path to one client)."""
    stores = {item.engine: item.store for item in loaded}
    for item in loaded:
        for mode in (m for m in modes if m in EMBEDDED):
            store = copy.deepcopy(item.store)
            store["search"]["mode"] = EMBEDDED[mode]
            store["search"]["embedder"] = {"kind": "minilm", "weights": weights}
            if item.engine == "qdrant":
                path = Path(store["connection"]["path"])
                copy_path = path.with_name(f"{path.name}-{mode}")
                shutil.copytree(path, copy_path, dirs_exist_ok=True)
                store["connection"]["path"] = str(copy_path)
            stores[store_name(item.engine, mode)] = store
    return {
        "server": {"name": "a2m-bench", "request_timeout_ms": 60_000, "log_level": "warning"},
        "stores": stores,
    }


def run(args: argparse.Namespace) -> Report:
    """Load, serve, query, evaluate. Raises SystemExit on a setup error."""
    engines = list(dict.fromkeys(args.engines))
    modes = list(dict.fromkeys(args.modes))
    tuning = Tuning(
        text_fields=tuple(args.text_fields.split(",")),
        rrf_k=args.rrf_k,
        candidates=args.candidates,
        fusion=args.fusion,
    )
    need_vectors = any(m != "bm25" for m in modes)
    split = load_split(
        Path(args.corpus),
        Path(args.queries),
        Path(args.qrels),
        limit_queries=args.limit_queries,
        need_vectors=need_vectors,
        compute_vectors=args.embed,
    )
    if args.sample_docs is not None:
        split = restrict(split, args.sample_docs)
    report = Report(
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
                    rankings, latencies, errors = asyncio.run(
                        recall_all(
                            server.base_url,
                            store_name(item.engine, mode),
                            mode,
                            split,
                            args.concurrency,
                            args.limit,
                        )
                    )
                    by_query = per_query(split.qrels, rankings, split.query_ids)
                    scores = {m: statistics.fmean(v.values()) for m, v in by_query.items()}
                    cell = Cell(
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
                    report.cells.append(cell)
                    print(
                        f"{item.engine:13s} {mode:6s} nDCG@10 {cell.ndcg10:.4f}  "
                        f"R@100 {cell.recall100:.4f}  errors {errors}",
                        file=sys.stderr,
                    )
        finally:
            stop_server(server.proc)
            if args.keep_log:
                Path(args.keep_log).write_bytes((work / "gateway.log").read_bytes())
    report.load_after = machine.load_text()
    return report


# ---- output


def markdown(report: Report) -> str:
    """The results table, with the reference figures beside each mode."""
    ref_col = "train reference (README)"
    lines = [
        f"| engine | version | analyzer | mode | nDCG@10 | R@100 | {ref_col} nDCG@10 | queries "
        "| errors | p50 ms/call |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in report.cells:
        ref = TRAIN_REFERENCE.get(EMBEDDED.get(c.mode, c.mode))
        lines.append(
            f"| {c.engine} | {c.version or '-'} | {c.analyzer or '-'} | {c.mode} | "
            f"{c.ndcg10:.3f} | {c.recall100:.3f} | {f'{ref:.3f}' if ref is not None else '-'} | "
            f"{c.queries} | {c.errors} | {c.p50_ms:.1f} |"
        )
    t = report.tuning
    lines += [
        "",
        f"{report.documents} documents, {report.evaluated_queries} judged queries "
        f"(`{Path(report.queries).name}`, `{Path(report.qrels).name}`); "
        f"limit {report.limit}; text_fields {', '.join(t['text_fields'])}; "
        f"fusion {t.get('fusion') or 'default'}; rrf_k {t['rrf_k']}; "
        f"candidates {t['candidates'] or 'unset'}. "
        "BEIR paper, BM25 (Elasticsearch) on the *test* split: "
        f"{BEIR_BM25_TEST}.",
        f"Run {report.started} on {report.machine}; load average (1/5/15 min) "
        f"{report.load_before} before, {report.load_after} after.",
    ]
    return "\n".join(lines)


def chart(report: Report, path: Path) -> None:
    """Grouped bars: nDCG@10 and R@100 per engine and mode, reference nDCG@10 as ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = list(dict.fromkeys(c.engine for c in report.cells))
    modes = list(dict.fromkeys(c.mode for c in report.cells))
    by = {(c.engine, c.mode): c for c in report.cells}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    width = 0.8 / max(1, len(modes))
    colours = {"bm25": "#4C72B0", "dense": "#DD8452", "hybrid": "#55A868"}
    for ax, measure in zip(axes, MEASURES, strict=True):
        for j, mode in enumerate(modes):
            xs = [i + (j - (len(modes) - 1) / 2) * width for i in range(len(engines))]
            ys = [
                (by[(e, mode)].ndcg10 if measure == "nDCG@10" else by[(e, mode)].recall100)
                if (e, mode) in by
                else 0.0
                for e in engines
            ]
            bars = ax.bar(xs, ys, width * 0.95, label=mode, color=colours.get(mode))
            ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=1)
            if measure == "nDCG@10" and mode in TRAIN_REFERENCE:
                ax.axhline(TRAIN_REFERENCE[mode], color=colours.get(mode), lw=0.8, ls="--")
        ax.set_xticks(range(len(engines)), engines)
        ax.set_title(measure)
        ax.set_ylim(0, 1.12)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(
        loc="upper center",
        ncol=3,
        fontsize=8,
        title="mode (dashed lines: SciFact README's train figures)",
        title_fontsize=8,
    )
    fig.suptitle(
        f"A2M memory/recall through the gateway: {Path(report.queries).name}, "
        f"{report.evaluated_queries} queries, {report.documents} documents",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    p.add_argument("--elasticsearch-url", default=os.environ.get("A2M_TEST_ELASTICSEARCH_URL"))
    p.add_argument("--opensearch-url", default=os.environ.get("A2M_TEST_OPENSEARCH_URL"))
    p.add_argument("--index", help="ES/OS index name (default: derived from the corpus)")
    p.add_argument(
        "--opensearch-analyzer",
        default=ANALYZERS["opensearch"],
        help="analyzer of title/text on OpenSearch (english as BEIR's baseline; standard to "
        "compare with Elasticsearch, which has no english analyzer here)",
    )
    p.add_argument("--out", help="write the report as JSON here")
    p.add_argument("--chart", help="write the PNG chart here")
    p.add_argument(
        "--write-docs",
        action="store_true",
        help="refresh the quality section of docs/benchmarks.md and docs/img/quality.png",
    )
    p.add_argument("--keep-log", help="copy the gateway's log here")
    args = p.parse_args(argv)
    if not 1 <= args.limit <= LIMIT:
        p.error(f"--limit must be 1..{LIMIT}")
    if args.limit_queries is not None and args.limit_queries < 1:
        p.error("--limit-queries must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
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
