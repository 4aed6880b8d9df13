"""Text-only dense recall with the local all-MiniLM-L6-v2 embedder against real engines.

Qdrant in process (qdrant-edge) holds a SciFact subset (the judged documents of the first 50
train queries plus 300 others) with the shared vectors; OpenSearch holds the
whole corpus (the session's shared test index). The store embeds each query's
text itself (``embedder: {kind: minilm}``) and must rank as the reference
query vectors do. Also: the width is checked at start, the request deadline
holds while the model is busy, and ``check`` tells matching vectors from others.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import yaml

from connectors.errors import EngineConfigError, EngineTimeout
from connectors.factory import make_connector
from gateway.a2m.params import RecallParams
from gateway.config import StoreConfig, validate_store
from gateway.embedders.minilm import MiniLMEmbedder
from gateway.store.connector_spec import connector_spec
from gateway.store.store import Store
from tests.connectors.conftest import Loaded as LuceneLoaded
from tests.connectors.conftest import scifact_store_data
from tests.support.scifact import SciFact, load_qdrant, load_scifact, subset
from tests.support.stores import started

pytestmark = pytest.mark.integration

COLLECTION = "minilm-scifact"


def qdrant_store(path: Path, **search: Any) -> StoreConfig:
    return validate_store(
        {
            "backend": "qdrant",
            "index": COLLECTION,
            "connection": {"path": str(path)},
            "mapping": {"content": "content", "key": "key", "created_at": "created_at"},
            "search": {
                "mode": "dense",
                "vector_field": "dense",
                "embedder": {"kind": "minilm"},
                **search,
            },
        }
    )


@pytest.fixture(scope="module")
def sf(scifact_dir: Path) -> SciFact:
    return load_scifact(scifact_dir)


@pytest.fixture(scope="module")
def qdrant(sf: SciFact, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    qids, dids = subset(sf, n_queries=50, n_others=300)
    path = tmp_path_factory.mktemp("minilm-qdrant")
    load_qdrant(path, sf, dids, collection=COLLECTION)
    return path, qids


def _hit_at_10(sf: SciFact, answers: dict[str, list[str]]) -> float:
    return sum(bool(set(ids) & sf.qrels[q]) for q, ids in answers.items()) / len(answers)


async def _recall(
    store: Store, qids: Sequence[str], sf: SciFact, text: bool
) -> dict[str, list[str]]:
    out = {}
    for q in qids:
        params = (
            RecallParams(query=sf.queries[q], limit=10)
            if text
            else RecallParams(embedding=sf.query_vector(q), limit=10)
        )
        result = await store.recall(params)
        out[q] = [r["id"] for r in result["records"]]
    return out


async def _ranks_like_the_reference(config: StoreConfig, sf: SciFact, qids: Sequence[str]) -> None:
    store = Store("s", config, make_connector(connector_spec(config)))
    async with started(store):
        assert store.describe()["embeddings"]["model"] == "all-MiniLM-L6-v2"
        own = await _recall(store, qids, sf, text=True)
        reference = await _recall(store, qids, sf, text=False)
    same_top = sum(own[q][:1] == reference[q][:1] for q in qids) / len(qids)
    overlap = np.mean([len(set(own[q]) & set(reference[q])) / 10 for q in qids])
    assert _hit_at_10(sf, own) >= _hit_at_10(sf, reference) - 0.04
    assert _hit_at_10(sf, own) >= 0.7  # a broken embedder ranks near 0 here
    assert same_top >= 0.9
    assert overlap >= 0.9


async def test_text_only_dense_recall_on_qdrant(
    sf: SciFact, qdrant: tuple[Path, list[str]]
) -> None:
    path, qids = qdrant
    await _ranks_like_the_reference(qdrant_store(path), sf, qids)


@pytest.mark.opensearch
async def test_text_only_dense_recall_on_opensearch(os_loaded: LuceneLoaded) -> None:
    config = validate_store(
        scifact_store_data(
            os_loaded, search={"mode": "dense", "embedder": {"kind": "minilm"}, "text_fields": []}
        )
    )
    qids = [q for q in os_loaded.sf.query_ids if q in os_loaded.sf.qrels][:40]
    await _ranks_like_the_reference(config, os_loaded.sf, qids)


async def test_width_mismatch_fails_at_start(tmp_path: Path) -> None:
    from qdrant_client import models

    from tests.support.edge_client import EdgeWriter

    client = EdgeWriter(tmp_path)
    client.create_collection(
        COLLECTION,
        vectors_config={"dense": models.VectorParams(size=8, distance=models.Distance.COSINE)},
    )
    client.close()
    config = qdrant_store(tmp_path)
    store = Store("s", config, make_connector(connector_spec(config)))
    try:
        with pytest.raises(
            EngineConfigError, match="gives 384-dimensional vectors; the index holds 8"
        ):
            await store.ensure_started()
        assert not store.started
    finally:
        await store.close()


async def test_deadline_holds_while_the_model_is_busy(
    sf: SciFact, qdrant: tuple[Path, list[str]]
) -> None:
    path, qids = qdrant
    config = qdrant_store(path).model_copy(update={"request_timeout_ms": 300})
    store = Store("s", config, make_connector(connector_spec(config)))
    gate, finished = threading.Event(), threading.Event()
    try:
        await store.ensure_started()
        embedder = store.embedder
        assert isinstance(embedder, MiniLMEmbedder)
        await embedder.embed_query("load the model before the deadline matters")
        encoder = embedder._encoder
        assert encoder is not None
        encode = encoder.encode

        def stuck(texts: Sequence[str], batch_size: int = 8) -> Any:
            gate.wait(30)  # a model far slower than the store's deadline
            finished.set()
            return encode(texts, batch_size)

        encoder.encode = stuck  # type: ignore[method-assign]
        with pytest.raises(EngineTimeout):
            await store.recall(RecallParams(query=sf.queries[qids[0]], limit=5))
        assert not finished.is_set(), "the deadline answered while the model was still busy"
    finally:
        gate.set()
        await store.close()


def _check(tmp_path: Path, path: Path, name: str) -> subprocess.CompletedProcess[str]:
    config = {
        "stores": {
            name: {
                "backend": "qdrant",
                "index": COLLECTION,
                "connection": {"path": str(path)},
                "mapping": {"content": "content", "created_at": "created_at"},
                "search": {
                    "mode": "dense",
                    "vector_field": "dense",
                    "embedder": {"kind": "minilm"},
                },
            }
        }
    }
    file = tmp_path / f"{name}.yaml"
    file.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(file)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_check_compares_stored_vectors_with_re_embedded_content(
    sf: SciFact, qdrant: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, _ = qdrant
    good = _check(tmp_path, path, "matching")
    assert good.returncode == 0, good.stderr
    vectors = json.loads(good.stdout)["vectors"]
    assert vectors["compared"] == 5
    assert vectors["agrees"] is True
    assert vectors["min_cosine"] >= 0.99
    assert "disagree" not in good.stderr

    # The same documents with each one's vector shifted to the next document: a corpus
    # embedded by something else, of the right width.
    from qdrant_client import models

    from tests.support.edge_client import EdgeWriter

    other = tmp_path / "other"
    _, dids = subset(sf, n_queries=5, n_others=20)
    load_qdrant(other, sf, dids, collection=COLLECTION, sparse_name=None)
    client = EdgeWriter(other)
    try:
        points, _ = client.scroll(COLLECTION, limit=100, with_vectors=True)
        vecs = [cast(dict[str, Any], p.vector)["dense"] for p in points]
        client.upsert(
            COLLECTION,
            points=[
                models.PointStruct(id=p.id, vector={"dense": vecs[i - 7]}, payload=p.payload)
                for i, p in enumerate(points)
            ],
        )
    finally:
        client.close()
    bad = _check(tmp_path, other, "shuffled")
    assert bad.returncode == 0, bad.stderr
    vectors = json.loads(bad.stdout)["vectors"]
    assert vectors["agrees"] is False
    assert vectors["min_cosine"] < 0.9
    assert "store shuffled: stored vectors disagree with embedder all-MiniLM-L6-v2" in bad.stderr
