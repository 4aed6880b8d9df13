"""Elasticsearch's and OpenSearch's conformance backends: the demo corpus and the vector set
bulk-loaded into an index of the node ``tests/engines/engines.py`` runs."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.support import demo_loader
from tests.support.conformance import ConformanceBackend, Seeding, VectorSet
from tests.support.lucene_loader import Engine

ES_SIMILARITY = {"Cosine": "cosine", "Dot": "dot_product", "Euclid": "l2_norm"}
OS_SPACE = {"Cosine": "cosinesimil", "Dot": "innerproduct", "Euclid": "l2"}


def _demo(engine: Engine, seeding: Seeding) -> dict[str, Any]:
    url: str = seeding.fixture(f"{engine}_url")
    loaded = demo_loader.load_demo_index(engine, url)
    return demo_loader.demo_store(engine, url, loaded.index)


def index_body(engine: Engine, vectors: VectorSet) -> dict[str, Any]:
    """The vector index, the vector's metric being ``vectors.distance``."""
    settings: dict[str, Any] = {"number_of_shards": 1, "number_of_replicas": 0}
    vector: dict[str, Any]
    if engine == "elasticsearch":
        vector = {
            "type": "dense_vector",
            "dims": vectors.dims,
            "index": True,
            "similarity": ES_SIMILARITY[vectors.distance],
            "index_options": {"type": "hnsw"},  # not quantised: scores as exact as Qdrant's
        }
    else:
        settings["knn"] = True
        vector = {
            "type": "knn_vector",
            "dimension": vectors.dims,
            # The Maven k-NN plugin has no native engines: Lucene HNSW (docs/engines.md).
            "method": {
                "name": "hnsw",
                "engine": "lucene",
                "space_type": OS_SPACE[vectors.distance],
            },
        }
    keywords = {name: {"type": "keyword"} for name in vectors.keyword_fields}
    return {
        "settings": {"index": settings},
        "mappings": {
            "dynamic": "strict",
            "properties": {
                vectors.text_field: {"type": "text", "analyzer": "standard"},
                **keywords,
                vectors.created_at_field: {"type": "date"},
                "embedding": vector,
            },
        },
    }


def _vectors(engine: Engine, vectors: VectorSet) -> dict[str, Any]:
    assert vectors.demo is not None
    [url] = vectors.demo["connection"]["hosts"]
    body = index_body(engine, vectors)
    docs = [
        (i, {**p, "embedding": v})
        for i, p, v in zip(vectors.ids, vectors.payloads, vectors.vectors, strict=True)
    ]
    index = demo_loader.index_name(f"a2m-conformance-vec-{vectors.distance.lower()}", body, docs)
    demo_loader.load_index(engine, url, index, body, docs)
    return {
        "backend": engine,
        "index": index,
        "connection": {"hosts": [url]},
        "mapping": vectors.mapping,
        "search": {
            "mode": "lexical",
            "text_fields": [vectors.text_field],
            "vector_field": "embedding",
        },
    }


ELASTICSEARCH = {
    "elasticsearch": ConformanceBackend(
        partial(_demo, "elasticsearch"),
        marks=(pytest.mark.elasticsearch,),
        vectors=partial(_vectors, "elasticsearch"),
    )
}
OPENSEARCH = {
    "opensearch": ConformanceBackend(
        partial(_demo, "opensearch"),
        marks=(pytest.mark.opensearch,),
        vectors=partial(_vectors, "opensearch"),
    )
}
