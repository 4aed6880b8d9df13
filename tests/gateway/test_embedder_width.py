"""The server's own embedder giving the wrong width is the server's fault.

A real Qdrant (qdrant-edge) holds 4-dimensional vectors; the embedder is a stub,
which is what is under test's control: the width it gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.a2m.errors import A2MError
from gateway.config import parse_config
from gateway.embedders import QueryEmbedder
from gateway.runtime import Gateway
from tests.support.wire import assert_valid

COLLECTION = "r2-width"


class FixedWidth(QueryEmbedder):
    def __init__(self, width: int, declared: int | None) -> None:
        self._width = width
        self._declared = declared

    @property
    def model_name(self) -> str | None:
        return "stub"

    @property
    def dimensions(self) -> int | None:
        return self._declared

    async def embed_query(self, text: str) -> list[float]:
        return [1.0] * self._width


def _gateway(tmp_path: Path, embedder: QueryEmbedder) -> Gateway:
    from qdrant_client import models

    from tests.support.edge_client import EdgeWriter

    client = EdgeWriter(tmp_path / "q")
    try:
        client.create_collection(
            COLLECTION,
            vectors_config={"dense": models.VectorParams(size=4, distance=models.Distance.COSINE)},
        )
        client.upsert(
            COLLECTION,
            points=[
                models.PointStruct(id=1, vector={"dense": [1.0, 0, 0, 0]}, payload={"content": "a"})
            ],
        )
    finally:
        client.close()
    store = {
        "backend": "qdrant",
        "index": COLLECTION,
        "connection": {"path": str(tmp_path / "q")},
        "mapping": {"content": "content"},
        "search": {
            "mode": "dense",
            "vector_field": "dense",
            "embedder": {"kind": "openai", "url": "http://127.0.0.1:9/v1/embeddings", "model": "m"},
        },
    }
    gateway = Gateway(parse_config({"stores": {"s": store}}))
    gateway.stores["s"].embedder = embedder
    return gateway


async def _recall_error(gateway: Gateway, params: dict[str, Any]) -> A2MError:
    try:
        with pytest.raises(A2MError) as err:
            await gateway.dispatcher("s").dispatch("memory/recall", params)
    finally:
        await gateway.close()
    return err.value


async def test_a_declared_wrong_width_is_refused_at_start(tmp_path: Path) -> None:
    gateway = _gateway(tmp_path, FixedWidth(8, declared=8))
    err = await _recall_error(gateway, {"query": "a"})
    assert int(err.code) == -32603
    assert err.data == {"reason": "index_unusable", "retryable": False}


async def test_an_undeclared_wrong_width_is_an_internal_error_not_the_callers(
    tmp_path: Path,
) -> None:
    gateway = _gateway(tmp_path, FixedWidth(8, declared=None))
    err = await _recall_error(gateway, {"query": "a"})
    assert int(err.code) == -32603  # not -32008: the caller sent no vector
    assert err.data == {"reason": "embedder_mismatch", "retryable": False}
    assert_valid("error", {"code": int(err.code), "message": err.message, "data": err.data})


async def test_the_right_width_answers(tmp_path: Path) -> None:
    # Control: the same store and stub at the index's width find the point.
    gateway = _gateway(tmp_path, FixedWidth(4, declared=4))
    try:
        result = await gateway.dispatcher("s").dispatch("memory/recall", {"query": "a"})
    finally:
        await gateway.close()
    assert [r["content"] for r in result["records"]] == ["a"]
