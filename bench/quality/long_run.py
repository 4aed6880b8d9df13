"""``python -m bench.quality --shape long|chunked|whole|nested``: evidence-sized answers, measured.

Each shape is loaded into every selected engine and served by one gateway process,
one store per stage setting:

- ``whole``: long documents, each hit's whole content (no stage after retrieval);
- ``long``: long documents with ``search.passages: {}`` (four passages in 600 chars: the
  engine's highlighter on Elasticsearch/OpenSearch), and with ``by: gateway`` (the
  gateway's windows; on Qdrant both are the gateway's), each also with ``rank: false``
  (the page not re-ordered by its records' best paragraphs, as it is by default);
- ``chunked``: the sections as records, without and with ``search.per_group: 1`` (folding
  the records it leaves out, and not), with ``search.passages: {}`` without and with
  ``per_group: 1``, and with ``rank: false`` (a page of records of one paragraph each
  keeps its order either way).
- ``nested`` (Elasticsearch, OpenSearch): long documents whose sections are also nested
  passages with their own vectors (``search.nested_passages``: the kNN leg ranks a
  document by its best section and names it), without and with passages, and with
  ``rank: true`` (off by default there).

Every judged query is sent as A2M ``memory/recall`` (``limit`` 10) exactly as an agent
would, and scored on what the client receives: **evidence@k** (the share of queries
whose first k records' contents share a run of at least 80 consecutive characters,
whitespace-normalised, with a relevant abstract), **characters** of those k contents
per query and per record, and document-level **nDCG@10** (records mapped to their
document, first occurrence kept). The gateway process's CPU time per recall
(``/proc/<pid>/stat``, the same run and process for every store) is reported beside.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.quality.collection import Split
from bench.quality.engines import ANALYZERS
from bench.quality.long_docs import Shapes, load_lucene, load_qdrant, normalise
from bench.quality.recall import mode_params

SHAPES = ("long", "chunked", "whole", "nested")
EVIDENCE_RUN = 80
"""Characters a returned content must share with a relevant abstract to count as evidence."""
RECALL_LIMIT = 10
STAGES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "whole": [("none", {})],
    "long": [
        ("passages", {"passages": {}}),
        ("passages-by-gateway", {"passages": {"by": "gateway"}}),
        ("passages no-rank", {"passages": {"rank": False}}),
        ("passages-by-gateway no-rank", {"passages": {"by": "gateway", "rank": False}}),
    ],
    "chunked": [
        ("none", {}),
        ("per_group=1", {"per_group": 1}),
        ("per_group=1 unfolded", {"per_group": 1, "fold_groups": False}),
        ("passages", {"passages": {}}),
        ("passages per_group=1", {"passages": {}, "per_group": 1}),
        ("passages no-rank", {"passages": {"rank": False}}),
    ],
    "nested": [
        ("none", {}),
        ("passages", {"passages": {}}),
        ("passages rank", {"passages": {"rank": True}}),
    ],
}
"""Per shape: (stage setting, the store's search keys for it)."""
ENGINE_ONLY = frozenset({"passages-by-gateway", "passages-by-gateway no-rank"})
"""Stage settings that differ from another only where the engine has a highlighter."""


@dataclass
class LongCell:
    engine: str
    mode: str
    shape: str
    stage: str
    queries: int
    errors: int
    evidence_at_k: float
    chars_per_query: float
    chars_per_record: float
    max_record_chars: int
    doc_ndcg10: float
    cpu_ms_per_recall: float
    p50_ms: float


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far, all its threads (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def has_evidence(content: str, relevant: list[set[str]]) -> bool:
    """Whether ``content`` shares an :data:`EVIDENCE_RUN`-character run with a relevant
    abstract (each given as the set of its normalised runs of that length)."""
    text = normalise(content)
    for i in range(len(text) - EVIDENCE_RUN + 1):
        run = text[i : i + EVIDENCE_RUN]
        if any(run in runs for runs in relevant):
            return True
    return False


def runs_of(text: str) -> set[str]:
    t = normalise(text)
    return {t[i : i + EVIDENCE_RUN] for i in range(len(t) - EVIDENCE_RUN + 1)}


def doc_ndcg(ranked_docs: list[int], gains: dict[int, int], k: int = 10) -> float:
    """nDCG@k of a ranking of documents (each once) against graded document relevance."""
    dcg = sum(gains.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked_docs[:k]))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


NESTED_KEYS = {
    "vector_field": "sections.vector",
    "nested_passages": {
        "path": "sections",
        "text_field": "sections.text",
        "start_field": "sections.start",
    },
}
"""The search keys of a store on the *nested* shape."""


def store_section(engine: str, shape: str, target: str, search: dict[str, Any]) -> dict[str, Any]:
    """The gateway store serving ``shape`` on ``engine`` (``target``: URL or shard path)."""
    if engine == "qdrant":
        from tests.support.scifact import DENSE, SPARSE

        return {
            "backend": "qdrant",
            "index": shape,
            "connection": {"path": target, "timeout_ms": 30_000},
            "mapping": {"content": "content", "key": "key", "group": "group"},
            "search": {"mode": "lexical", "sparse_vector": SPARSE, "vector_field": DENSE, **search},
        }
    return {
        "backend": engine,
        "index": f"a2m-bench-long-{shape}",
        "connection": {"hosts": [target], "timeout_ms": 30_000},
        "mapping": {"id": "doc_id", "content": "text", "key": "key", "group": "group"},
        "search": {
            "mode": "lexical",
            "text_fields": ["text"],
            "vector_field": "embedding",
            **(NESTED_KEYS if shape == "nested" else {}),
            **search,
        },
    }


def load_stores(
    shapes: Shapes, wanted: list[str], engines: list[str], args: argparse.Namespace, work: Path
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Load each (engine, record shape) once; a store per (engine, shape, stage setting)."""
    stores: dict[tuple[str, str, str], dict[str, Any]] = {}
    for engine in engines:
        for shape in wanted:
            if shape == "nested" and engine == "qdrant":
                print("qdrant: no nested passages; --shape nested skipped", file=sys.stderr)
                continue
            records_shape = shape if shape in ("chunked", "nested") else "long"
            records = shapes.chunked if shape == "chunked" else shapes.long
            nested = shapes.nested if shape == "nested" else None
            if engine == "qdrant":
                base = work / f"qdrant-{records_shape}"
                if not base.exists():
                    load_qdrant(base, records_shape, records)
            else:
                url = args.elasticsearch_url if engine == "elasticsearch" else args.opensearch_url
                if not url:
                    raise SystemExit(f"no URL for {engine}")
                analyzer = args.opensearch_analyzer if engine == "opensearch" else ANALYZERS[engine]
                index = f"a2m-bench-long-{records_shape}"
                seconds = load_lucene(engine, url, index, records, analyzer, nested)
                print(f"{engine} {index}: ready in {seconds:.1f} s", file=sys.stderr)
            for stage, search in STAGES[shape]:
                if engine == "qdrant" and stage in ENGINE_ONLY:
                    continue  # no highlighter: its passages are the gateway's anyway
                target = (
                    url
                    if engine != "qdrant"
                    else str(work / f"q-{shape}-{stage}".replace(" ", "-"))
                )
                if engine == "qdrant":
                    shutil.copytree(base, target)  # local mode: one client per directory
                section = store_section(engine, records_shape, target, search)
                stores[(engine, shape, stage)] = section
    return stores


async def recall_shape(
    base_url: str, store: str, mode: str, split: Split, concurrency: int
) -> tuple[dict[str, list[dict[str, Any]]], list[float], int]:
    """Every evaluated query through POST /a2m/<store>: records, latencies, error count."""
    answers: dict[str, list[dict[str, Any]]] = {}
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[str] = asyncio.Queue()
    for qid in split.query_ids:
        queue.put_nowait(qid)
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0) as http:

        async def worker() -> None:
            nonlocal errors
            while not queue.empty():
                qid = queue.get_nowait()
                vector = split.sf.query_vector(qid)
                params = mode_params(mode, split.sf.queries[qid], vector, RECALL_LIMIT)
                body = {"jsonrpc": "2.0", "id": qid, "method": "memory/recall", "params": params}
                start = time.perf_counter()
                answer = (await http.post(f"/a2m/{store}", json=body)).json()
                latencies.append(time.perf_counter() - start)
                if "result" not in answer:
                    errors += 1
                    continue
                answers[qid] = answer["result"]["records"]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answers, latencies, errors
