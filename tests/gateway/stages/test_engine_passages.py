"""The engine's passages in the gateway: which stores ask for them, and the records they make."""

from __future__ import annotations

from typing import Any

from connectors.base import Hit, Passages
from connectors.spec import PassageSpec
from gateway.config import validate_store
from gateway.stages.config import PassagesConfig
from gateway.stages.passages import PassageStage
from gateway.stages.pipeline import Stages
from gateway.store.connector_spec import connector_spec, engine_passages
from gateway.store.mapping import RecordMapper


def _config(backend: str, **passages: Any) -> Any:
    connection: dict[str, Any] = (
        {"path": "/tmp/none"} if backend == "qdrant" else {"hosts": ["http://127.0.0.1:9200"]}
    )
    search: dict[str, Any] = (
        {"sparse_vector": "s"} if backend == "qdrant" else {"text_fields": ["text"]}
    )
    return validate_store(
        {
            "backend": backend,
            "index": "i",
            "connection": connection,
            "mapping": {"content": "text", "key": "key", "uri": "url"},
            "search": {"mode": "lexical", **search, "passages": passages},
        }
    )


def test_elasticsearch_and_opensearch_stores_give_the_passages_to_the_highlighter() -> None:
    for backend in ("elasticsearch", "opensearch"):
        config = _config(backend, max_chars=120, count=2)
        # Two passages and the separator between them within 120: 120 // 2 - 3 each.
        want = PassageSpec(max_chars=120, count=2, fragment_chars=57)
        assert connector_spec(config).search.passages == want
        assert Stages(config.search, engine_passages=True).describe() == [
            {"stage": "passages", "by": "engine", "max_chars": 120, "count": 2},
            {"stage": "rank", "by": "best_paragraph", "k": 60},
        ]
    assert engine_passages(_config("elasticsearch", by="gateway")) is None
    assert engine_passages(_config("qdrant")) is None  # no highlighter: the gateway's


def test_a_hit_with_engine_passages_becomes_a_record_that_says_where_they_sit() -> None:
    mapper = RecordMapper(_config("elasticsearch").mapping)
    text = "Head sentence here. Bone fractures rise. Tail words. Vitamin D helps bone."
    spans = ((20, 40), (53, 74))
    hit = Hit(
        "1",
        {"text": text, "key": "k", "url": "https://example.org/doc"},
        score=0.9,
        passages=Passages(spans, tuple(text[s:e] for s, e in spans), len(text), best=1),
    )
    record = mapper.to_record(hit)
    assert record.content == text  # whole from the mapper: the passage stage cuts it
    stage = PassageStage(PassagesConfig(), by_engine=True)
    stage.apply([record], "bone fractures vitamin")
    assert record.content == "Bone fractures rise. … Vitamin D helps bone."
    assert record.metadata is not None
    where = record.metadata["passage"]
    assert where["offsets"] == [[20, 40], [53, 74]]
    assert where["best"] == 1  # the engine's first, second in text order
    assert where["length"] == len(text)
    assert where["uri"] == "https://example.org/doc#:~:text=Bone%20fractures%20rise."
    # An unranked read (fetch) of the same hit is the whole document.
    assert mapper.to_record(hit, ranked=False).content == text
