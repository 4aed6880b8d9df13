"""embeddings (§3.7) on a store that declares it: the demo is lexical only, so this module builds a
small store with a dense vector on each backend and serves it through the real CLI, over HTTP and
stdio, from a config file: a qdrant-edge collection (the dense vector beside the sparse one),
or an Elasticsearch (``dense_vector``) / OpenSearch (``knn_vector``, Lucene HNSW) index of the
same points, searched by BM25 on the text and kNN on the vector.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from connectors.qdrant.sparse import LexicalSparseEncoder
from tests.conformance.conftest import (
    PROTOCOL,
    QDRANT,
    QDRANT_SERVERS,
    A2MClient,
    HttpClient,
    StoreBackend,
    assert_scores,
    start_http_server,
    start_stdio_server,
)
from tests.support import demo_loader

pytestmark = pytest.mark.integration

DIMS = 8
EMBEDDING_MISMATCH = -32008
INVALID_PARAMS = -32602
TOPICS = [
    "rotating deploy keys every ninety days",
    "the build cache lives on the shared volume",
    "postgres backups run nightly at two",
    "the staging cluster has three nodes",
    "oncall rotation changes on mondays",
    "feature flags are read at startup",
]
METRIC_OF = {"Cosine": "cosine", "Dot": "dot", "Euclid": "l2"}
ES_SIMILARITY = {"Cosine": "cosine", "Dot": "dot_product", "Euclid": "l2_norm"}
OS_SPACE = {"Cosine": "cosinesimil", "Dot": "innerproduct", "Euclid": "l2"}
MAPPING = {
    "content": "body",
    "uri": "path",
    "media_type_from_uri": True,
    "key": "slug",
    "created_at": "ts",
}


def vector_of(i: int) -> list[float]:
    """Unit vectors, so every metric ranks a point's own vector first."""
    raw = [math.sin(i * 1.7 + j * 0.9) + (2.0 if j == i else 0.0) for j in range(DIMS)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def payload(i: int, text: str) -> dict[str, Any]:
    return {
        "body": text,
        "path": f"notes/{i}.txt",
        "slug": f"notes/{i}",
        "ts": f"2026-02-0{i + 1}T10:00:00.000Z",
    }


def build_store(backend: StoreBackend, root: Path, distance: str) -> Path:
    """A store of len(TOPICS) points on `backend` and the config serving it; returns its path."""
    if backend.name == QDRANT:
        store = build_qdrant_store(root, distance)
    elif backend.name in QDRANT_SERVERS:
        assert backend.store is not None
        store = build_qdrant_store(root, distance, backend.store["connection"])
    else:
        store = build_engine_store(backend, distance)
    config_path = root / "gateway.yaml"
    config_path.write_text(yaml.safe_dump({"stores": {"vec": store}}), encoding="utf-8")
    return config_path


def build_qdrant_store(
    root: Path, distance: str, server: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A qdrant-edge shard under root, or on the Qdrant server a ``server`` connection names."""
    import os
    import warnings

    from qdrant_client import QdrantClient, models

    from tests.support.edge_client import EdgeWriter

    path = root / "qdrant"
    encoder = LexicalSparseEncoder(avgdl=LexicalSparseEncoder.average_length(TOPICS))
    name = "vec" if server is None else f"a2m-conformance-vec-{distance.lower()}"
    if server is None:
        client: Any = EdgeWriter(path)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
            key = os.environ["A2M_TEST_QDRANT_API_KEY"]
            client = QdrantClient(url=server["url"], api_key=key, check_compatibility=False)
        if client.collection_exists(name):
            client.delete_collection(name)
    try:
        client.create_collection(
            name,
            vectors_config=models.VectorParams(
                size=DIMS, distance=getattr(models.Distance, distance.upper())
            ),
            sparse_vectors_config={"text": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        points = []
        for i, text in enumerate(TOPICS):
            sv = encoder.encode_document(text)
            points.append(
                models.PointStruct(
                    id=i + 1,
                    vector={
                        "": vector_of(i),
                        "text": models.SparseVector(
                            indices=list(sv.indices), values=list(sv.values)
                        ),
                    },
                    payload=payload(i, text),
                )
            )
        client.upsert(name, points=points, wait=True)
        if server is not None:  # the payload indexes a server needs (order_by, fetch)
            client.create_payload_index(name, "ts", models.PayloadSchemaType.DATETIME, wait=True)
            client.create_payload_index(name, "slug", models.PayloadSchemaType.KEYWORD, wait=True)
    finally:
        client.close()
    return {
        "backend": "qdrant",
        "index": name,
        "connection": {"path": str(path)} if server is None else server,
        "mapping": MAPPING,
        "search": {"mode": "lexical", "sparse_vector": "text"},
    }


def engine_index_body(engine: str, distance: str) -> dict[str, Any]:
    """The vector index on Elasticsearch or OpenSearch, the vector's metric being `distance`."""
    settings: dict[str, Any] = {"number_of_shards": 1, "number_of_replicas": 0}
    vector: dict[str, Any]
    if engine == "elasticsearch":
        vector = {
            "type": "dense_vector",
            "dims": DIMS,
            "index": True,
            "similarity": ES_SIMILARITY[distance],
            "index_options": {"type": "hnsw"},  # not quantised: scores as exact as Qdrant's
        }
    else:
        settings["knn"] = True
        vector = {
            "type": "knn_vector",
            "dimension": DIMS,
            # The Maven k-NN plugin has no native engines: Lucene HNSW (docs/engines.md).
            "method": {"name": "hnsw", "engine": "lucene", "space_type": OS_SPACE[distance]},
        }
    return {
        "settings": {"index": settings},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "body": {"type": "text", "analyzer": "standard"},
                "path": {"type": "keyword"},
                "slug": {"type": "keyword"},
                "ts": {"type": "date"},
                "embedding": vector,
            },
        },
    }


def build_engine_store(backend: StoreBackend, distance: str) -> dict[str, Any]:
    assert backend.store is not None
    engine: Any = backend.name
    [url] = backend.store["connection"]["hosts"]
    body = engine_index_body(backend.name, distance)
    docs = [
        (str(i + 1), {**payload(i, text), "embedding": vector_of(i)})
        for i, text in enumerate(TOPICS)
    ]
    index = demo_loader.index_name(f"a2m-conformance-vec-{distance.lower()}", body, docs)
    demo_loader.load_index(engine, url, index, body, docs)
    return {
        "backend": backend.name,
        "index": index,
        "connection": {"hosts": [url]},
        "mapping": MAPPING,
        "search": {"mode": "lexical", "text_fields": ["body"], "vector_field": "embedding"},
    }


@pytest.fixture(scope="module", params=["http", "stdio"])
def vec_client(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    backend: StoreBackend,
) -> Iterator[A2MClient]:
    """A cosine store over each transport (Qdrant: each process on its own copy, a shard
    locks; an engine: one index)."""
    root = tmp_path_factory.mktemp(f"vec-{backend.name}-{request.param}")
    config = build_store(backend, root, "Cosine")
    if request.param == "http":
        server = start_http_server(root, config)
        client = HttpClient(server.base_url)
        yield client
        client.close()
        server.stop()
    else:
        stdio = start_stdio_server(root, config)
        yield stdio.client
        stdio.stop()


def test_describe_reports_real_dimensions_and_metric(vec_client: A2MClient) -> None:
    describe = vec_client.call("memory/describe", {"protocol": PROTOCOL})
    assert "embeddings" in describe["capabilities"]
    emb = describe["embeddings"]
    assert emb["dimensions"] == DIMS
    assert emb["metric"] == "cosine"
    assert emb["metric"] in emb["metrics"]
    assert set(emb["metrics"]) <= {"cosine", "dot", "l2"}
    assert "model" in emb


@pytest.mark.parametrize("width", [DIMS - 1, DIMS + 1, 1, 2 * DIMS, 0])
def test_wrong_width_is_embedding_mismatch(vec_client: A2MClient, width: int) -> None:
    err = vec_client.error("memory/recall", {"embedding": [0.1] * width})
    if width == 0:
        assert err["code"] in (EMBEDDING_MISMATCH, INVALID_PARAMS)
    else:
        assert err["code"] == EMBEDDING_MISMATCH
    with_text = vec_client.error("memory/recall", {"query": "keys", "embedding": [0.1] * width})
    assert with_text["code"] == err["code"]


def test_a_points_own_vector_ranks_it_first(vec_client: A2MClient) -> None:
    for i in range(len(TOPICS)):
        records = vec_client.call("memory/recall", {"embedding": vector_of(i), "limit": 3})[
            "records"
        ]
        assert_scores(records)
        assert records[0]["content"] == TOPICS[i]


def test_text_and_vector_together_rank(vec_client: A2MClient) -> None:
    records = vec_client.call(
        "memory/recall", {"query": "backups nightly", "embedding": vector_of(2), "limit": 3}
    )["records"]
    assert_scores(records)
    assert records[0]["content"] == TOPICS[2]


def test_vectors_only_when_asked(vec_client: A2MClient) -> None:
    plain = vec_client.call("memory/recall", {"query": "cluster nodes"})["records"]
    assert plain
    assert all("embedding" not in r for r in plain)
    timeline = vec_client.call("memory/timeline")["records"]
    assert len(timeline) == len(TOPICS)
    assert all("embedding" not in r for r in timeline)


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) < 1e-5 for x, y in zip(a, b, strict=True))


def test_vectors_come_back_as_stored(vec_client: A2MClient) -> None:
    by_content = {t: vector_of(i) for i, t in enumerate(TOPICS)}
    recalled = vec_client.call(
        "memory/recall", {"query": "cluster nodes", "embeddings": True, "limit": 6}
    )["records"]
    timeline = vec_client.call("memory/timeline", {"embeddings": True})["records"]
    fetched = vec_client.call("memory/fetch", {"key": "notes/3", "embeddings": True})["record"]
    assert len(recalled) >= 1
    assert len(timeline) == len(TOPICS)
    assert fetched is not None
    for record in [*recalled, *timeline, fetched]:
        assert _close(record["embedding"], by_content[record["content"]]), record["id"]


def test_store_capabilities_follow_the_mapping(vec_client: A2MClient) -> None:
    caps = set(vec_client.call("memory/describe")["capabilities"])
    assert {"core", "external", "keys", "embeddings"} <= caps
    record = vec_client.call("memory/fetch", {"key": "notes/0"})["record"]
    assert record["uri"] == "notes/0.txt"
    assert record["media_type"] == "text/plain"


@pytest.mark.parametrize("distance", ["Dot", "Euclid"])
def test_describe_names_the_index_metric(
    tmp_path_factory: pytest.TempPathFactory, backend: StoreBackend, distance: str
) -> None:
    root = tmp_path_factory.mktemp(f"vec-{backend.name}-{distance.lower()}")
    server = start_http_server(root, build_store(backend, root, distance))
    client = HttpClient(server.base_url)
    try:
        describe: dict[str, Any] = client.call("memory/describe")
        assert describe["embeddings"]["metric"] == METRIC_OF[distance]
        assert describe["embeddings"]["dimensions"] == DIMS
        records = client.call("memory/recall", {"embedding": vector_of(4), "limit": 6})["records"]
        assert_scores(records)
        assert records[0]["content"] == TOPICS[4]
        assert client.error_code("memory/recall", {"embedding": [0.0] * 3}) == EMBEDDING_MISMATCH
    finally:
        client.close()
        server.stop()
