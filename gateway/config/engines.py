"""One store model per installed engine, discriminated on ``backend``; ``StoreConfig`` is
their union.

Each engine's registry entry (:mod:`connectors.registry`) gives its ``backend:``
value, its ``connection:`` model and its own ``search:`` keys; :func:`store_model`
makes them a store model on :class:`StoreBase`. Each model carries its own
connection and search models (``extra="forbid"``), so a key of another engine
(``aws_sigv4`` on a Qdrant store, ``path`` on an Elasticsearch store) is refused by
the schema itself. The built-in engines' models are spelled out below, so code and
tests that read an engine's own keys are type-checked; an engine registered by a
plugin gets its model made from its entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, create_model

from connectors.lucene.config import (
    ElasticsearchConnection,
    LuceneSearchKeys,
    OpenSearchConnection,
)
from connectors.qdrant.config import QdrantConnection, QdrantSearchKeys
from connectors.registry import Engine, engines
from gateway.config.search import SearchConfig
from gateway.config.stores import DemoConfig, StoreBase


class LuceneSearchConfig(LuceneSearchKeys, SearchConfig):
    """Elasticsearch and OpenSearch: BM25 over text fields, kNN on a dense_vector field."""

    @property
    def ranks_by_passage(self) -> bool:
        """The kNN leg ranks a document by its best nested passage (``nested_passages``;
        whatever the store's default mode, a recall may ask for a hybrid or dense one)."""
        return self.nested_passages is not None


class QdrantSearchConfig(QdrantSearchKeys, SearchConfig):
    """Qdrant: lexical is a named sparse vector; dense is the named (or default) vector."""


class ElasticsearchStoreConfig(StoreBase):
    backend: Literal["elasticsearch"]
    connection: ElasticsearchConnection
    search: LuceneSearchConfig = Field(default_factory=LuceneSearchConfig)


class OpenSearchStoreConfig(StoreBase):
    backend: Literal["opensearch"]
    connection: OpenSearchConnection
    search: LuceneSearchConfig = Field(default_factory=LuceneSearchConfig)


class QdrantStoreConfig(StoreBase):
    backend: Literal["qdrant"]
    connection: QdrantConnection
    search: QdrantSearchConfig = Field(default_factory=QdrantSearchConfig)
    demo: DemoConfig | None = None


LuceneStoreConfig = ElasticsearchStoreConfig | OpenSearchStoreConfig
"""The stores a Lucene connector serves (both share connection and search keys)."""

_BUILT_IN: dict[str, type[StoreBase]] = {
    "elasticsearch": ElasticsearchStoreConfig,
    "opensearch": OpenSearchStoreConfig,
    "qdrant": QdrantStoreConfig,
}


def store_model(entry: Engine) -> type[StoreBase]:
    """The store model of an engine: its backend value, connection model and search keys
    on :class:`StoreBase`."""
    built_in = _BUILT_IN.get(entry.name)
    if built_in is not None and built_in.model_fields["connection"].annotation is entry.connection:
        return built_in
    title = entry.name.title().replace("-", "").replace("_", "")
    search = type(f"{title}SearchConfig", (entry.search_keys, SearchConfig), {})
    fields: dict[str, Any] = {
        "backend": (Literal[entry.name], ...),
        "connection": (entry.connection, ...),
        "search": (search, Field(default_factory=search)),
    }
    model: type[StoreBase] = create_model(f"{title}StoreConfig", __base__=StoreBase, **fields)
    return model


STORE_MODELS: dict[str, type[StoreBase]] = {e.name: store_model(e) for e in engines()}
"""Each installed engine's store model, by ``backend:`` value."""

if TYPE_CHECKING:
    StoreConfig = Annotated[
        ElasticsearchStoreConfig | OpenSearchStoreConfig | QdrantStoreConfig,
        Field(discriminator="backend"),
    ]
else:
    StoreConfig = Annotated[
        Union[tuple(STORE_MODELS.values())],  # noqa: UP007 - a union of a runtime tuple
        Field(discriminator="backend"),
    ]
"""A store of any installed engine: pydantic picks the model from ``backend``."""

_STORE_ADAPTER: TypeAdapter[StoreConfig] = TypeAdapter(StoreConfig)


def validate_store(data: Any) -> StoreConfig:
    """One store's config from plain data, the model picked by its ``backend``.

    Raises:
        pydantic.ValidationError: the data is not a valid store of its backend.
    """
    return _STORE_ADAPTER.validate_python(data)
