"""What a connector is told about its index: plain, frozen values, no gateway types.

The gateway builds a :class:`ConnectorSpec` from its store config
(``gateway.store.connector_spec``); connectors read only this. Field names follow the
config keys they come from (``mapping.group``, ``search.vector_field``), so a
connector's error message can still name the key an operator must fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar, cast

Backend = str
"""An installed engine's name (:mod:`connectors.registry`)."""
SearchMode = Literal["lexical", "dense", "hybrid"]


@dataclass(frozen=True, slots=True)
class Secret:
    """A credential: its repr never shows the value (specs end up in logs and tracebacks)."""

    value: str = field(repr=False)

    def get_secret_value(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return "Secret('**********')"


@dataclass(frozen=True, slots=True)
class ConnectionSpec:
    """How to reach the engine: what every engine's connection has.

    Each engine's package extends it with its own keys (``connectors.<engine>.spec``),
    built by its ``connection:`` model's ``spec()``; its connector reads that class.
    """

    timeout_ms: int = 10_000
    pool_maxsize: int = 32
    retries: int = 3


C = TypeVar("C", bound=ConnectionSpec)
C2 = TypeVar("C2", bound=ConnectionSpec)


@dataclass(frozen=True, slots=True)
class FieldsSpec:
    """The engine fields the connector reads, orders, groups and must match exactly."""

    id: str = "_id"
    read: tuple[str, ...] = ()
    """Every field fetched from the engine (nothing else travels)."""
    content: str | None = None
    created_at: str | None = None
    group: str | None = None
    key: str | None = None
    owner: str | None = None
    scope: tuple[str, ...] = ()
    """Fields a scope filter tests: they must match exactly (keyword), never by phrase."""


@dataclass(frozen=True, slots=True)
class PassageSpec:
    """``search.passages`` chosen by the engine's highlighter (Elasticsearch, OpenSearch)."""

    max_chars: int
    """A content of at most this many characters is returned whole."""
    count: int
    """Fragments per hit, at most."""
    fragment_chars: int
    """Characters per fragment, at most (a longer one is cut at a word end)."""


@dataclass(frozen=True, slots=True)
class NestedPassageSpec:
    """``search.nested_passages`` (Elasticsearch, OpenSearch): the index keeps its documents'
    passages as ``nested`` objects, each with its own vector (``search.vector_field``)."""

    path: str
    """The nested field holding the passages."""
    text_field: str
    """The passage's text (a field under ``path``), found verbatim in the content."""
    start_field: str | None = None
    """Where the passage starts in the content (a field under ``path``), when indexed."""


@dataclass(frozen=True, slots=True)
class SearchSpec:
    mode: SearchMode = "lexical"
    text_fields: tuple[str, ...] = ()
    vector_field: str | None = None
    sparse_vector: str | None = None
    sparse_analyzer: Literal["light", "english"] = "light"
    """Qdrant: the analyzer the sparse vector was indexed with (connectors.qdrant.sparse)."""
    collapse_group: bool = False
    highlight: bool = False
    highlight_fragment_size: int = 300
    passages: PassageSpec | None = None
    """Passages by the engine's highlighter; None: the gateway chooses them, if at all."""
    nested: NestedPassageSpec | None = None
    """The index's nested passages: the kNN leg ranks a document by its best one."""


@dataclass(frozen=True)
class ConnectorSpec(Generic[C]):
    """One store as its connector sees it; ``connection`` is its engine's own spec.

    Not slotted: a slotted frozen generic dataclass cannot be built as ``ConnectorSpec[X](...)``.
    """

    backend: Backend
    index: str
    connection: C
    fields: FieldsSpec = FieldsSpec()
    search: SearchSpec = SearchSpec()

    def of(self, kind: type[C2]) -> ConnectorSpec[C2]:
        """This spec, its connection checked to be ``kind`` (an engine's factory asks).

        Raises:
            TypeError: the connection is another engine's.
        """
        if not isinstance(self.connection, kind):
            raise TypeError(
                f"backend {self.backend!r}: a {type(self.connection).__name__}, "
                f"not a {kind.__name__}"
            )
        return cast("ConnectorSpec[C2]", self)
