"""Loads a split's corpus into each engine through the engines' own APIs, and describes the
gateway store that serves it.

Loading reuses the test suite's loaders (``tests.support``): Elasticsearch and
OpenSearch through the clients' bulk API (the MiniLM vector in ``embedding``: a
``dense_vector`` / Lucene-HNSW ``knn_vector``, cosine), Qdrant in local mode on
disk or on a Qdrant server (``qdrant-server``, with its payload indexes): a
named dense vector plus the gateway's lexical sparse encoder under Qdrant's IDF
modifier.

Analyzers on ``title`` and ``text`` (:data:`ANALYZERS`): OpenSearch gets
``english`` (stemming and English stop words, as BEIR's BM25 baseline had);
Elasticsearch keeps ``standard``, because the only Elasticsearch that runs here,
the integ-test distribution from Maven Central, lacks the analysis-common
module that defines ``english`` (it is not published on Central), and a
stemmer cannot be built from core token filters alone.

Every store is configured in ``lexical`` mode with its vector field, so one
store answers all three benchmark modes by what a call carries: text only ->
BM25, an ``embedding`` only -> kNN, both -> hybrid (RRF in the gateway for
Elasticsearch/OpenSearch, Qdrant's own RRF query for Qdrant).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.quality.collection import Split
from tests.support import lucene_loader
from tests.support import scifact as qdrant_loader

ENGINES = ("elasticsearch", "opensearch", "qdrant")
SERVER_ENGINES = ("qdrant-server",)
"""Engines a run names explicitly: the Qdrant server (A2M_TEST_QDRANT_URL and _API_KEY)."""
ANALYZERS = {"elasticsearch": "standard", "opensearch": "english"}
QDRANT_COLLECTION = "bench"


@dataclass(frozen=True)
class Tuning:
    """The knobs the benchmark may tune (on a training split only)."""

    text_fields: tuple[str, ...] = ("title", "text")
    rrf_k: int = 60
    candidates: int | None = None
    """None: the store's default (legs of 2 x limit on ES/OS, 100 on Qdrant)."""
    lexical_weight: float = 1.0
    dense_weight: float = 1.0
    fusion: str | None = None
    """None: the store's default ``search.fusion``."""

    def search_keys(self) -> dict[str, Any]:
        """The tuned keys every store's ``search`` section carries."""
        keys: dict[str, Any] = {
            "rrf_k": self.rrf_k,
            "candidates": self.candidates,
            "lexical_weight": self.lexical_weight,
            "dense_weight": self.dense_weight,
        }
        if self.fusion is not None:
            keys["fusion"] = self.fusion
        return keys


@dataclass(frozen=True)
class Loaded:
    engine: str
    store: dict[str, Any]
    """The store's section of the gateway config."""
    seconds: float
    note: str
    version: str = ""
    """The engine's version as the node reports it (empty for Qdrant local mode)."""
    analyzer: str = ""


def _limits() -> dict[str, Any]:
    # R@100 needs 100 results per call.
    return {"max_recall_limit": 100}


def node_version(url: str) -> str:
    """The node's version from ``GET /_nodes/_local`` (the ES test node has no ``GET /``)."""
    r = httpx.get(f"{url}/_nodes/_local", params={"filter_path": "nodes.*.version"}, timeout=10)
    r.raise_for_status()
    nodes = r.json().get("nodes", {})
    return str(next(iter(nodes.values()))["version"]) if nodes else "?"


def load_lucene(
    engine: str, url: str, index: str, split: Split, tuning: Tuning, analyzer: str
) -> Loaded:
    """Bulk-load (or reuse, when already complete) the index and describe its store.

    Raises:
        RuntimeError: the bulk load failed.
    """
    assert engine in ("elasticsearch", "opensearch")
    result = lucene_loader.load_index(
        engine,  # type: ignore[arg-type]
        url,
        index,
        split.sf,
        analyzer=analyzer,
    )
    store = {
        "backend": engine,
        "index": index,
        "connection": {"hosts": [url], "timeout_ms": 30_000},
        "mapping": {"content": "text", "key": "key", "metadata": ["title"]},
        "search": {
            "mode": "lexical",
            "text_fields": list(tuning.text_fields),
            "vector_field": "embedding",
            **tuning.search_keys(),
        },
        "limits": _limits(),
    }
    note = f"{result.count} docs {'loaded' if result.loaded else 'already present'}"
    return Loaded(engine, store, result.seconds, note, node_version(url), analyzer)


def load_qdrant(path: Path, split: Split, tuning: Tuning) -> Loaded:
    """Write the corpus to a fresh Qdrant local-mode directory and describe its store.

    Raises:
        ValueError: a document id is not an integer (the shared loader uses them as point ids).
    """
    if not all(d.isdigit() for d in split.sf.corpus_ids):
        raise ValueError("the Qdrant loader needs integer document ids (they are point ids)")
    started = time.monotonic()
    qdrant_loader.load_qdrant(path, split.sf, split.sf.corpus_ids, collection=QDRANT_COLLECTION)
    store = load_qdrant_store(path, tuning)
    count = len(split.sf.corpus_ids)
    return Loaded("qdrant", store, time.monotonic() - started, f"{count} docs loaded")


def load_qdrant_store(path: Path, tuning: Tuning) -> dict[str, Any]:
    """The Qdrant store's config section (local mode at path)."""
    return {
        "backend": "qdrant",
        "index": QDRANT_COLLECTION,
        "connection": {"path": str(path), "timeout_ms": 30_000},
        "mapping": {"content": "content", "key": "key", "metadata": ["title"]},
        "search": {
            "mode": "lexical",
            "sparse_vector": qdrant_loader.SPARSE,
            "vector_field": qdrant_loader.DENSE,
            **tuning.search_keys(),
        },
        "limits": _limits(),
    }


def doc_id_of(record: dict[str, Any]) -> str:
    """The collection's document id of a recalled record: both loaders key it ``scifact/<id>``."""
    key = record.get("key")
    if isinstance(key, str) and "/" in key:
        return key.split("/", 1)[1]
    return str(record["id"])


def load_qdrant_server(url: str, split: Split, tuning: Tuning, *, grpc_port: int | None) -> Loaded:
    """(Re)create the corpus on a Qdrant server, the key from A2M_TEST_QDRANT_API_KEY.

    The store reads the key from that variable too, as an operator's config would;
    with ``grpc_port`` it reads over gRPC.
    """
    import os
    import warnings

    key = os.environ.get("A2M_TEST_QDRANT_API_KEY")
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
        server = {"url": url, "api_key": key, "timeout": 120, "check_compatibility": False}
        qdrant_loader.load_qdrant(
            "", split.sf, split.sf.corpus_ids, collection=QDRANT_COLLECTION, server=server
        )
    local = load_qdrant_store(Path(""), tuning)
    connection: dict[str, Any] = {"url": url, "timeout_ms": 30_000}
    if key:
        connection["api_key"] = "${A2M_TEST_QDRANT_API_KEY}"
    if grpc_port is not None:
        connection.update(prefer_grpc=True, grpc_port=grpc_port)
    store = {**local, "connection": connection}
    count = len(split.sf.corpus_ids)
    with httpx.Client(timeout=10, headers={"api-key": key or ""}) as client:
        version = str(client.get(url).json()["version"])
    return Loaded(
        "qdrant-server", store, time.monotonic() - started, f"{count} docs loaded", version
    )


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
