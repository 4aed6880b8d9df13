"""The embedded Qdrant store, qdrant-edge against qdrant-client's local mode, in one run.

Three figures, each side by side (not a test; local mode is kept here only for this
comparison, through qdrant-client as the dev extra installs it):

* ``engine``: per-query latency (p50, p90) of the engine call itself, the same points and
  queries in both: local mode ``:memory:`` (``QdrantClient.query_points`` / ``scroll``)
  and an edge shard on /dev/shm (``EdgeShard.query`` / ``scroll``), on the demo corpus
  (55 chunks; lexical with the IDF modifier, hybrid RRF when the minilm extra is
  installed, timeline) and on SciFact (5,183 abstracts; lexical, dense, hybrid RRF,
  timeline); plus the edge store through the gateway's connector
  (``QdrantConnector.search``: encoding, worker hop, score mapping);
* ``start``: ``a2m-gateway serve`` to ``/readyz`` 200, lexical (``config/demo.yaml``) and
  hybrid (no ``--config``, vectors cached), this checkout and ``--root`` (one on local
  mode), median of ``--runs`` after one discarded warm-up start;
* ``rss``: the same processes' ``VmRSS`` after 100 ``memory/recall`` calls.

    python -m bench.embedded_store [--runs 5] [--root CHECKOUT_ON_LOCAL_MODE] [--skip-scifact]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.machine import load_text, rss_mib
from bench.process import start_gateway, stop_server
from bench.quality.collection import SCIFACT
from connectors.base import SparseVector
from connectors.qdrant.shard import ShardPoint, create_shard, memory_root, remove_tree, write_points
from connectors.qdrant.sparse import LexicalSparseEncoder
from tests.support.scifact import server_point

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "how are scores normalised",
    "what does a read-only server answer to remember",
    "timeline order when there is no date field",
    "origin header and loopback binding",
    "key prefix matching",
    "which error code means the engine timed out",
    "install the helm chart with an existing secret",
    "reciprocal rank fusion of lexical and dense",
    "fetch a record by its key",
    "how many processes can serve the demo",
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(call: Callable[[], Any], repeat: int) -> list[float]:
    """Milliseconds per call, after one untimed warm-up call."""
    call()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


class Collection:
    """One corpus in both engines: local mode in memory and an edge shard on /dev/shm."""

    def __init__(
        self, points: list[ShardPoint], dense: int | None, sparse: str, indexes: dict[str, str]
    ) -> None:
        from qdrant_client import QdrantClient, models

        self.root = memory_root()
        self.dense_name = "dense" if dense else None
        self.sparse = sparse
        self.edge = create_shard(
            f"{self.root}/c",
            dense={"dense": (dense, "cosine")} if dense else None,
            sparse_idf=[sparse],
            indexes=indexes,
        )
        write_points(self.edge, points)
        self.local = QdrantClient(location=":memory:")
        self.local.create_collection(
            "c",
            vectors_config={
                "dense": models.VectorParams(size=dense, distance=models.Distance.COSINE)
            }
            if dense
            else {},
            sparse_vectors_config={sparse: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        for start in range(0, len(points), 256):
            self.local.upsert(
                "c", points=[server_point(p) for p in points[start : start + 256]], wait=True
            )

    def close(self) -> None:
        self.edge.close()
        self.local.close()
        remove_tree(self.root)

    def query(self, engine: str, sparse: SparseVector, dense: list[float] | None) -> Any:
        """One lexical (dense None), dense (sparse empty) or hybrid RRF query, top 10."""
        if engine == "edge":
            return self._edge_query(sparse, dense)
        return self._local_query(sparse, dense)

    def _edge_query(self, sparse: SparseVector, dense: list[float] | None) -> Any:
        import qdrant_edge as qe

        sv = qe.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
        lexical = qe.Query.Nearest(sv, using=self.sparse)
        if dense is None:
            request = qe.QueryRequest(limit=10, query=lexical, with_payload=True)
        elif not sparse.indices:
            nearest = qe.Query.Nearest(dense, using="dense")
            request = qe.QueryRequest(limit=10, query=nearest, with_payload=True)
        else:
            legs = [
                qe.Prefetch(limit=20, query=lexical),
                qe.Prefetch(limit=20, query=qe.Query.Nearest(dense, using="dense")),
            ]
            request = qe.QueryRequest(
                limit=10,
                query=qe.Fusion.Rrf(k=60),  # type: ignore[arg-type]
                prefetches=legs,
                with_payload=True,
            )
        return self.edge.query(request)

    def _local_query(self, sparse: SparseVector, dense: list[float] | None) -> Any:
        from qdrant_client import models

        sv = models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
        if dense is None:
            return self.local.query_points("c", query=sv, using=self.sparse, limit=10)
        if not sparse.indices:
            return self.local.query_points("c", query=dense, using="dense", limit=10)
        legs = [
            models.Prefetch(query=sv, using=self.sparse, limit=20),
            models.Prefetch(query=dense, using="dense", limit=20),
        ]
        rrf = models.RrfQuery(rrf=models.Rrf(k=60))
        return self.local.query_points("c", prefetch=legs, query=rrf, limit=10)

    def timeline(self, engine: str) -> Any:
        """The newest 10 by created_at (order_by)."""
        if engine == "edge":
            import qdrant_edge as qe

            order = qe.OrderBy(key="created_at", direction=qe.Direction.Desc)
            return self.edge.scroll(qe.ScrollRequest(limit=10, order_by=order, with_payload=True))
        from qdrant_client import models

        order_by = models.OrderBy(key="created_at", direction=models.Direction.DESC)
        return self.local.scroll("c", limit=10, order_by=order_by)


def engine_rows(
    name: str,
    coll: Collection,
    queries: Sequence[tuple[SparseVector, list[float] | None]],
    repeat: int,
) -> list[str]:
    """Markdown rows: one per query shape, local mode and edge p50/p90 in ms."""
    shapes: list[tuple[str, Callable[[str, int], Any]]] = [
        ("lexical (IDF)", lambda e, i: coll.query(e, queries[i][0], None)),
    ]
    if coll.dense_name:
        empty = SparseVector(indices=(), values=())
        shapes.append(("dense", lambda e, i: coll.query(e, empty, queries[i][1])))
        shapes.append(("hybrid RRF", lambda e, i: coll.query(e, *queries[i])))
    shapes.append(("timeline (order_by)", lambda e, i: coll.timeline(e)))
    rows = []
    for shape, run in shapes:
        figures = {}
        for engine in ("local", "edge"):
            times: list[float] = []
            for i in range(len(queries)):
                times += timed(_bound(run, engine, i), max(1, repeat // len(queries)))
            figures[engine] = (_pct(times, 0.5), _pct(times, 0.9))
        (lp50, lp90), (ep50, ep90) = figures["local"], figures["edge"]
        rows.append(
            f"| {name} | {shape} | {lp50:.2f} / {lp90:.2f} | {ep50:.3f} / {ep90:.3f} "
            f"| {lp50 / ep50:.0f}x |"
        )
    return rows


def _bound(run: Callable[[str, int], Any], engine: str, i: int) -> Callable[[], Any]:
    return lambda: run(engine, i)


def demo_collection() -> tuple[Collection, list[tuple[SparseVector, list[float] | None]], Any]:
    """The demo's 55 chunks (hybrid when the minilm extra and its cached vectors are there)."""
    from gateway.config.engines import QdrantStoreConfig
    from gateway.demo import (
        DEMO_STORE,
        chunks,
        default_demo_config,
        demo_points,
        embed_chunks,
        fingerprint,
    )
    from gateway.demo.index import indexed_text
    from gateway.embedders.minilm import load_encoder, missing_message

    hybrid = missing_message("auto") is None
    store = default_demo_config(hybrid=hybrid).stores[DEMO_STORE]
    assert isinstance(store, QdrantStoreConfig)
    items = chunks()
    sha = fingerprint(items, store.search.sparse_analyzer) + (
        f"+{store.search.vector_field}" if hybrid else ""
    )
    vectors = None
    if hybrid:
        texts = [indexed_text(c) for c in items]
        vectors = asyncio.run(embed_chunks(store, texts, sha))
    points = [
        ShardPoint(
            p.id, {("dense" if n == "minilm" else n): v for n, v in p.vectors.items()}, p.payload
        )
        for p in demo_points(store, items, sha, vectors)
    ]
    coll = Collection(points, 384 if hybrid else None, "text-sparse", {"created_at": "datetime"})
    encoder = LexicalSparseEncoder(analyzer="english")
    dense = load_encoder("auto", 1).encode(QUESTIONS) if hybrid else None
    queries = [
        (encoder.encode_query(q), [float(x) for x in dense[i]] if dense is not None else None)
        for i, q in enumerate(QUESTIONS)
    ]
    return coll, queries, store


def scifact_collection(
    n_queries: int,
) -> tuple[Collection, list[tuple[SparseVector, list[float] | None]]]:
    from tests.support.scifact import documents, load_scifact

    sf = load_scifact(SCIFACT)
    docs = documents(sf, sf.corpus_ids)
    encoder = LexicalSparseEncoder(
        avgdl=LexicalSparseEncoder.average_length(d["content"] for d in docs)
    )
    points = [
        ShardPoint(
            int(d["id"]),
            {
                "dense": sf.doc_vector(str(d["id"])),
                "text-sparse": encoder.encode_document(d["content"]),
            },
            {k: v for k, v in d.items() if k != "id"},
        )
        for d in docs
    ]
    coll = Collection(points, sf.corpus_vectors.shape[1], "text-sparse", {"created_at": "datetime"})
    qids = [q for q in sf.query_ids if q in sf.qrels][:n_queries]
    queries: list[tuple[SparseVector, list[float] | None]] = [
        (encoder.encode_query(sf.queries[q]), sf.query_vector(q)) for q in qids
    ]
    return coll, queries


async def connector_p50(repeat: int) -> list[str]:
    """The edge demo store through the gateway's connector: search(text[, vector])."""
    from connectors.base import SearchRequest
    from connectors.qdrant.connector import QdrantConnector
    from connectors.qdrant.spec import QdrantConnectionSpec
    from gateway.demo import DEMO_STORE, default_demo_config, ensure_demo_index
    from gateway.embedders.minilm import load_encoder, missing_message
    from gateway.store.connector_spec import connector_spec

    rows = []
    for hybrid in (False, True):
        if hybrid and missing_message("auto") is not None:
            continue
        store = default_demo_config(hybrid=hybrid).stores[DEMO_STORE]
        conn = QdrantConnector(connector_spec(store).of(QdrantConnectionSpec))
        await ensure_demo_index(store, conn)
        await conn.open()
        dense = load_encoder("auto", 1).encode(QUESTIONS) if hybrid else None
        times: list[float] = []
        for _ in range(max(1, repeat // len(QUESTIONS))):
            for i, q in enumerate(QUESTIONS):
                vector = [float(x) for x in dense[i]] if dense is not None else None
                start = time.perf_counter()
                await conn.search(SearchRequest(limit=10, text=q, dense=vector, fusion="rrf"))
                times.append((time.perf_counter() - start) * 1000)
        await conn.close()
        mode = "hybrid RRF" if hybrid else "lexical"
        p50, p90 = _pct(times, 0.5), _pct(times, 0.9)
        rows.append(
            f"| demo, edge via QdrantConnector.search | {mode} | | {p50:.3f} / {p90:.3f} | |"
        )
    return rows


def process_rows(runs: int, root: str | None) -> list[str]:
    """serve to /readyz (median of runs) and RSS after 100 recalls, per checkout and mode."""
    import httpx

    rows = []
    for label, checkout in (("this checkout", None), ("--root", root)):
        if label == "--root" and root is None:
            continue
        for mode, config in (("lexical", REPO / "config" / "demo.yaml"), ("hybrid", None)):
            data = Path(tempfile.mkdtemp(prefix="a2m-embedded-"))
            starts, rss = [], []
            for run in range(runs + 1):
                server = start_gateway(config, data, data / "serve.log", root=checkout)
                try:
                    with httpx.Client(base_url=server.base_url, timeout=30) as http:
                        for i in range(100):
                            body = {
                                "jsonrpc": "2.0",
                                "id": i,
                                "method": "memory/recall",
                                "params": {"query": QUESTIONS[i % len(QUESTIONS)], "limit": 10},
                            }
                            answer = http.post("/a2m/demo", json=body).json()
                            assert "result" in answer, answer
                    if run:  # the first start is a warm-up (caches vectors and bytecode)
                        starts.append(server.ready_after_s)
                        rss.append(rss_mib(server.proc.pid) or 0.0)
                finally:
                    stop_server(server.proc)
            rows.append(
                f"| {label} | {mode} | {statistics.median(starts):.2f} "
                f"({min(starts):.2f}-{max(starts):.2f}) | {statistics.median(rss):.0f} "
                f"({min(rss):.0f}-{max(rss):.0f}) |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=200, help="timed engine calls per shape")
    parser.add_argument("--root", help="a checkout on local mode, for the process figures")
    parser.add_argument("--skip-scifact", action="store_true")
    parser.add_argument("--skip-process", action="store_true")
    args = parser.parse_args()
    print(f"load before: {load_text()}")
    print("| corpus | query | local mode p50 / p90 ms | qdrant-edge p50 / p90 ms | p50 ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    coll, queries, _ = demo_collection()
    for row in engine_rows("demo (55)", coll, queries, args.repeat):
        print(row, flush=True)
    coll.close()
    if not args.skip_scifact:
        coll, sq = scifact_collection(50)
        for row in engine_rows("SciFact (5,183)", coll, sq, args.repeat):
            print(row, flush=True)
        coll.close()
    for row in asyncio.run(connector_p50(args.repeat)):
        print(row, flush=True)
    if not args.skip_process:
        print()
        print("| checkout | demo | serve to /readyz, s: median (min-max) | RSS, 100 recalls, MiB |")
        print("| --- | --- | ---: | ---: |")
        for row in process_rows(args.runs, args.root):
            print(row, flush=True)
    print(f"load after: {load_text()}")


if __name__ == "__main__":
    main()
