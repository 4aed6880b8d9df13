"""embeddings (§3.7) on a store that declares it: the demo is lexical only, so this module builds a
small store with a dense vector on each backend and serves it through the real CLI, over HTTP and
stdio, from a config file. Each backend's engine builds it (its conformance backend's vector
hook, tests/support/conformance): a qdrant-edge collection (the dense vector beside the sparse
one), or an Elasticsearch (``dense_vector``) / OpenSearch (``knn_vector``, Lucene HNSW) index of
the same points, searched by BM25 on the text and kNN on the vector. An engine without dense
vectors gives no hook and is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.conftest import (
    CONFORMANCE,
    PROTOCOL,
    A2MClient,
    HttpClient,
    StoreBackend,
    assert_scores,
    start_http_server,
    start_stdio_server,
)
from tests.support.conformance import VectorSet

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
    """A store of len(TOPICS) points on `backend` and the config serving it; returns its path.

    Skips a backend whose engine keeps no dense vectors (its conformance backend has no
    vector hook).
    """
    hook = CONFORMANCE[backend.name].vectors
    if hook is None:
        pytest.skip(f"{backend.name}: the engine keeps no dense vectors")
    vectors = VectorSet(
        root=root,
        distance=distance,
        dims=DIMS,
        ids=[str(i + 1) for i in range(len(TOPICS))],
        payloads=[payload(i, text) for i, text in enumerate(TOPICS)],
        vectors=[vector_of(i) for i in range(len(TOPICS))],
        mapping=MAPPING,
        text_field="body",
        keyword_fields=("path", "slug"),
        key_field="slug",
        created_at_field="ts",
        demo=backend.store,
    )
    config_path = root / "gateway.yaml"
    config_path.write_text(yaml.safe_dump({"stores": {"vec": hook(vectors)}}), encoding="utf-8")
    return config_path


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
