from __future__ import annotations

from connectors.base import ID_FIELD, Hit
from gateway.config import MappingConfig
from gateway.store.mapping import RecordMapper, media_type_from_uri


def test_template_content_uri_media_type_metadata_allow_list() -> None:
    mapper = RecordMapper(
        MappingConfig(
            content_template="{title}\n\n{body.text}",
            uri="url",
            media_type_from_uri=True,
            key="k",
            group="doc",
            created_at="ts",
            metadata=["lang", "tags"],
        )
    )
    hit = Hit(
        id="e1",
        source={
            "title": "T",
            "body": {"text": "B"},
            "url": "https://x.example/a/report.pdf?v=2",
            "k": "kb/a",
            "doc": "d1",
            "ts": "2026-01-02T03:04:05Z",
            "lang": "en",
            "tags": ["x", "y"],
            "acl": ["secret-group"],
        },
        score=0.5,
    )
    wire = mapper.to_record(hit).to_wire()
    assert wire == {
        "id": "e1",
        "content": "T\n\nB",
        "uri": "https://x.example/a/report.pdf?v=2",
        "media_type": "application/pdf",
        "key": "kb/a",
        "group": "d1",
        "created_at": "2026-01-02T03:04:05.000Z",
        "metadata": {"lang": "en", "tags": ["x", "y"]},
        "score": 0.5,
    }
    assert "acl" not in str(wire)


def test_each_record_field_is_read_from_its_own_mapped_field() -> None:
    fields = ("role", "group", "owner", "key", "uri", "media_type")
    mapper = RecordMapper(
        MappingConfig(
            id="doc_id",
            content="c",
            created_at="made",
            updated_at="changed",
            metadata=["m"],
            **{name: f"src_{name}" for name in fields},
        )
    )
    source = {
        "doc_id": "d9",
        "c": "text",
        "made": "2026-01-02T00:00:00Z",
        "changed": "2026-03-04T00:00:00Z",
        "m": 1,
        **{f"src_{name}": f"value of {name}" for name in fields},
    }
    record = mapper.to_record(
        Hit(id="e1", source=source, score=0.25, vector=[0.5]), with_embedding=True
    )
    assert {name: getattr(record, name) for name in fields} == {
        name: f"value of {name}" for name in fields
    }
    assert (record.id, record.content, record.metadata) == ("d9", "text", {"m": 1})
    assert (record.score, record.embedding) == (0.25, [0.5])
    assert record.to_wire()["created_at"] == "2026-01-02T00:00:00.000Z"
    assert record.to_wire()["updated_at"] == "2026-03-04T00:00:00.000Z"


def test_engine_field_exposes_only_mapped_names() -> None:
    mapper = RecordMapper(MappingConfig(content="c", key="k", metadata=["lang"]))
    assert mapper.engine_field("key") == "k"
    assert mapper.engine_field("lang") == "lang"
    assert mapper.engine_field("id") == ID_FIELD
    assert mapper.engine_field("group") is None
    assert mapper.engine_field("acl") is None


def test_embedding_only_on_request() -> None:
    mapper = RecordMapper(MappingConfig(content="c"))
    hit = Hit(id="1", source={"c": "x"}, vector=[0.1, 0.2])
    assert "embedding" not in mapper.to_record(hit).to_wire()
    assert mapper.to_record(hit, with_embedding=True).to_wire()["embedding"] == [0.1, 0.2]


def test_media_type_from_uri_extension() -> None:
    assert media_type_from_uri("docs/guide.md#setup") == "text/markdown"
    assert media_type_from_uri("s3://bucket/key/img.PNG") == "image/png"
    assert media_type_from_uri("https://x.example/") is None


def test_created_at_falls_back_to_the_configured_constant() -> None:
    """§3.1 requires created_at: a store with no date field names a fallback."""
    unmapped = RecordMapper(MappingConfig(content="c"))
    assert unmapped.to_record(Hit(id="1", source={"c": "x"})).to_wire()["created_at"] == (
        "1970-01-01T00:00:00.000Z"
    )
    chosen = MappingConfig.model_validate(
        {"content": "c", "created_at": "ts", "created_at_fallback": "2024-06-01T12:00:00+02:00"}
    )
    mapper = RecordMapper(chosen)
    # A document without a (parseable) date takes the fallback, in UTC.
    for source in ({"c": "x"}, {"c": "x", "ts": "not a date"}):
        wire = mapper.to_record(Hit(id="1", source=source)).to_wire()
        assert wire["created_at"] == "2024-06-01T10:00:00.000Z"
    dated = mapper.to_record(Hit(id="2", source={"c": "x", "ts": "2026-01-02T03:04:05Z"}))
    assert dated.to_wire()["created_at"] == "2026-01-02T03:04:05.000Z"


def test_created_at_warning_only_without_a_date_field() -> None:
    warning = MappingConfig(content="c").created_at_warning()
    assert warning is not None
    assert "mapping.created_at_fallback" in warning
    assert "1970-01-01T00:00:00Z" in warning
    assert MappingConfig(content="c", created_at="ts").created_at_warning() is None
