"""Qdrant's conformance backends: the embedded demo (qdrant-edge in the gateway's process),
and the demo corpus on the Qdrant server the environment names, over REST and over gRPC."""

from __future__ import annotations

import os
import warnings
from functools import partial
from typing import Any

import pytest

from connectors.qdrant.sparse import LexicalSparseEncoder
from tests.support import demo_loader
from tests.support.conformance import ConformanceBackend, Seeding, VectorSet


def _embedded(seeding: Seeding) -> None:
    return None


def _server(grpc: bool, seeding: Seeding) -> dict[str, Any]:
    return demo_loader.qdrant_demo_store(seeding.fixture("qdrant_server"), grpc=grpc)


def vector_store(vectors: VectorSet) -> dict[str, Any]:
    """A qdrant-edge shard under ``vectors.root``, or a collection on the Qdrant server the
    backend's demo store reads (the dense vector beside the sparse one)."""
    from qdrant_client import QdrantClient, models

    from tests.support.edge_client import EdgeWriter

    server = vectors.demo["connection"] if vectors.demo is not None else None
    path = vectors.root / "qdrant"
    texts = [str(p[vectors.text_field]) for p in vectors.payloads]
    encoder = LexicalSparseEncoder(avgdl=LexicalSparseEncoder.average_length(texts))
    name = "vec" if server is None else f"a2m-conformance-vec-{vectors.distance.lower()}"
    client: Any
    if server is None:
        client = EdgeWriter(path)
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
                size=vectors.dims, distance=getattr(models.Distance, vectors.distance.upper())
            ),
            sparse_vectors_config={"text": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        points = []
        for point_id, text, payload, dense in zip(
            vectors.ids, texts, vectors.payloads, vectors.vectors, strict=True
        ):
            sv = encoder.encode_document(text)
            sparse = models.SparseVector(indices=list(sv.indices), values=list(sv.values))
            points.append(
                models.PointStruct(
                    id=int(point_id), vector={"": dense, "text": sparse}, payload=payload
                )
            )
        client.upsert(name, points=points, wait=True)
        if server is not None:  # the payload indexes a server needs (order_by, fetch)
            created_at, key = vectors.created_at_field, vectors.key_field
            client.create_payload_index(
                name, created_at, models.PayloadSchemaType.DATETIME, wait=True
            )
            client.create_payload_index(name, key, models.PayloadSchemaType.KEYWORD, wait=True)
    finally:
        client.close()
    return {
        "backend": "qdrant",
        "index": name,
        "connection": {"path": str(path)} if server is None else server,
        "mapping": vectors.mapping,
        "search": {"mode": "lexical", "sparse_vector": "text"},
    }


QDRANT = {
    "qdrant": ConformanceBackend(_embedded, vectors=vector_store),
    "qdrant-rest": ConformanceBackend(
        partial(_server, False), marks=(pytest.mark.integration,), vectors=vector_store
    ),
    "qdrant-grpc": ConformanceBackend(
        partial(_server, True),
        marks=(pytest.mark.integration,),
        records_only=True,
        vectors=vector_store,
    ),
}
"""The embedded demo runs every store-facing test; the server over gRPC only the modules
that read records (above the connector the gateway is the same whatever Qdrant's
protocol; the connector's gRPC paths are tests/connectors/test_qdrant*.py's)."""
