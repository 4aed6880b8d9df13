"""Each engine's connection spec is its own class, and a connector takes only its own."""

from __future__ import annotations

import pytest

from connectors.lucene.spec import LuceneConnectionSpec
from connectors.qdrant.spec import QdrantConnectionSpec
from connectors.registry import engine, make_connector
from connectors.spec import ConnectorSpec


@pytest.mark.parametrize(
    ("backend", "connection", "kind", "connector"),
    [
        ("elasticsearch", {"hosts": ["http://es:9200"]}, LuceneConnectionSpec, "LuceneConnector"),
        ("opensearch", {"hosts": ["http://os:9200"]}, LuceneConnectionSpec, "LuceneConnector"),
        ("qdrant", {"url": "http://q:6333"}, QdrantConnectionSpec, "QdrantConnector"),
    ],
)
def test_a_connection_model_builds_its_engines_spec(
    backend: str, connection: dict[str, object], kind: type[object], connector: str
) -> None:
    spec = engine(backend).connection.model_validate(connection).spec()
    assert type(spec) is kind
    assert type(make_connector(ConnectorSpec(backend, "idx", spec))).__name__ == connector


def test_a_connector_refuses_another_engines_connection() -> None:
    spec = ConnectorSpec("qdrant", "idx", LuceneConnectionSpec(hosts=("http://es:9200",)))
    with pytest.raises(TypeError, match="LuceneConnectionSpec, not a QdrantConnectionSpec"):
        make_connector(spec)


def test_of_gives_back_the_same_spec_when_the_connection_is_that_kind() -> None:
    spec = ConnectorSpec("qdrant", "idx", QdrantConnectionSpec(location=":memory:"))
    assert spec.of(QdrantConnectionSpec) is spec
