"""What a connector is told about its index: plain, frozen values, no gateway types.

The gateway builds a :class:`ConnectorSpec` from its store config
(``gateway.store.connector_spec``); connectors read only this. Field names follow the
config keys they come from (``mapping.group``, ``search.vector_field``), so a
connector's error message can still name the key an operator must fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from connectors.http_answer import AnswerLimits

DEFAULT_LIMITS = AnswerLimits()

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
class AwsSigV4:
    region: str
    service: Literal["es", "aoss"] = "es"


@dataclass(frozen=True, slots=True)
class ConnectionSpec:
    """How to reach the engine; each backend reads the keys that apply to it."""

    hosts: tuple[str, ...] = ()
    cloud_id: Secret | None = None
    url: str | None = None
    path: str | None = None
    location: str | None = None
    api_key: Secret | None = None
    username: str | None = None
    password: Secret | None = None
    bearer_token: Secret | None = None
    ca_certs: str | None = None
    verify_certs: bool = True
    aws_sigv4: AwsSigV4 | None = None
    access_token: Secret | None = None
    prefer_grpc: bool = False
    grpc_port: int = 6334
    timeout_ms: int = 10_000
    pool_maxsize: int = 32
    retries: int = 3
    sniff: bool = False
    """Learn the cluster's nodes from the engine (at start, after a node fails, periodically)."""
    sniff_interval_ms: int = 60_000
    max_header_bytes: int = DEFAULT_LIMITS.header_bytes
    """Bounds on each engine answer: its status line and headers, its body as sent, and
    its body once decompressed (Elasticsearch and OpenSearch)."""
    max_body_bytes: int = DEFAULT_LIMITS.body_bytes
    max_decoded_bytes: int = DEFAULT_LIMITS.decoded_bytes

    @property
    def answer_limits(self) -> AnswerLimits:
        return AnswerLimits(self.max_header_bytes, self.max_body_bytes, self.max_decoded_bytes)

    @property
    def fails_over(self) -> bool:
        """More than one node may serve a request: a failed or hung one is left for another."""
        return len(self.hosts) > 1 or self.sniff


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


@dataclass(frozen=True, slots=True)
class ConnectorSpec:
    backend: Backend
    index: str
    connection: ConnectionSpec = ConnectionSpec()
    fields: FieldsSpec = FieldsSpec()
    search: SearchSpec = SearchSpec()

    @property
    def has_vectors(self) -> bool:
        """The index must hold a dense vector (a vector field, or a non-lexical Qdrant store)."""
        return self.search.vector_field is not None or (
            self.backend == "qdrant" and self.search.mode != "lexical"
        )
