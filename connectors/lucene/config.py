"""How to reach Elasticsearch and OpenSearch: one ``connection:`` model each, refusing the
other engines' keys."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator

from connectors.config import EngineConnection, EngineSearchKeys, StrictModel, secret
from connectors.lucene.spec import DEFAULT_LIMITS, LuceneConnectionSpec
from connectors.lucene.spec import AwsSigV4 as AwsSigV4Spec
from connectors.spec import NestedPassageSpec


class _LuceneConnection(EngineConnection):
    """Elasticsearch and OpenSearch: HTTP nodes, TLS, and one way to authenticate."""

    hosts: list[str] = Field(default_factory=list)
    api_key: SecretStr | None = None
    username: str | None = None
    password: SecretStr | None = None
    bearer_token: SecretStr | None = None
    ca_certs: str | None = None
    verify_certs: bool = True
    sniff: bool = Field(
        default=False,
        description="learn the cluster's nodes from the engine; only when every node's own "
        "address is reachable from the gateway (never behind a load balancer)",
    )
    sniff_interval_ms: int = Field(default=60_000, ge=1_000, le=3_600_000)
    max_header_bytes: int = Field(
        default=DEFAULT_LIMITS.header_bytes,
        ge=1_024,
        description="an engine answer's status line and headers, at most",
    )
    max_body_bytes: int = Field(
        default=DEFAULT_LIMITS.body_bytes,
        ge=1_024,
        description="an engine answer's body as sent (compressed or not), at most",
    )
    max_decoded_bytes: int = Field(
        default=DEFAULT_LIMITS.decoded_bytes,
        ge=1_024,
        description="an engine answer's body once decompressed, at most",
    )

    def _auth_modes(self) -> dict[str, bool]:
        return {
            "api_key": self.api_key is not None,
            "username/password": self.username is not None,
            "bearer_token": self.bearer_token is not None,
        }

    def _check_target(self) -> None:
        if not self.hosts:
            raise ValueError("connection: a store needs connection.hosts")

    @model_validator(mode="after")
    def _consistent(self) -> _LuceneConnection:
        self._check_target()
        if self.password is not None and not self.username:
            raise ValueError("connection.password needs connection.username")
        modes = self._auth_modes()
        if sum(modes.values()) > 1:
            raise ValueError(f"connection: choose one of {', '.join(modes)}")
        return self

    def urls(self) -> list[str]:
        return list(self.hosts)

    def spec(self) -> LuceneConnectionSpec:
        return LuceneConnectionSpec(
            hosts=tuple(self.hosts),
            api_key=secret(self.api_key),
            username=self.username,
            password=secret(self.password),
            bearer_token=secret(self.bearer_token),
            ca_certs=self.ca_certs,
            verify_certs=self.verify_certs,
            timeout_ms=self.timeout_ms,
            pool_maxsize=self.pool_maxsize,
            retries=self.retries,
            sniff=self.sniff,
            sniff_interval_ms=self.sniff_interval_ms,
            max_header_bytes=self.max_header_bytes,
            max_body_bytes=self.max_body_bytes,
            max_decoded_bytes=self.max_decoded_bytes,
        )


class ElasticsearchConnection(_LuceneConnection):
    cloud_id: SecretStr | None = Field(default=None, description="Elastic Cloud, instead of hosts")

    def _check_target(self) -> None:
        if not (self.hosts or self.cloud_id):
            raise ValueError("connection: an elasticsearch store needs hosts or cloud_id")
        if self.sniff and self.cloud_id is not None:
            raise ValueError("connection.sniff: Elastic Cloud is reached through its proxy only")

    def target(self) -> str | None:
        return "Elastic Cloud (connection.cloud_id)" if self.cloud_id is not None else None

    def spec(self) -> LuceneConnectionSpec:
        return replace(super().spec(), cloud_id=secret(self.cloud_id))


class AwsSigV4(StrictModel):
    region: str
    service: Literal["es", "aoss"] = "es"


class OpenSearchConnection(_LuceneConnection):
    aws_sigv4: AwsSigV4 | None = Field(
        default=None, description="sign each request with the pod's AWS credentials"
    )

    def _check_target(self) -> None:
        if not self.hosts:
            raise ValueError("connection: an opensearch store needs hosts")
        if self.sniff and self.aws_sigv4 is not None:
            raise ValueError("connection.sniff: a managed AWS domain is reached by its endpoint")

    def _auth_modes(self) -> dict[str, bool]:
        return {**super()._auth_modes(), "aws_sigv4": self.aws_sigv4 is not None}

    def spec(self) -> LuceneConnectionSpec:
        sigv4 = self.aws_sigv4
        signer = AwsSigV4Spec(region=sigv4.region, service=sigv4.service) if sigv4 else None
        return replace(super().spec(), aws_sigv4=signer)


class NestedPassages(StrictModel):
    """``search.nested_passages``: the index keeps each document's passages in a ``nested``
    field, each passage with its own vector (``search.vector_field`` lies under ``path``).
    The kNN leg then ranks a document by its best passage and names it (``inner_hits``)."""

    path: str = Field(min_length=1, description="the nested field holding the passages")
    text_field: str = Field(
        min_length=1,
        description="the passage's text, a field under path; found verbatim in the "
        "content field, it becomes the record's passage (search.passages)",
    )
    start_field: str | None = Field(
        default=None,
        description="optional: the passage's start offset in the content, a field under path",
    )

    @model_validator(mode="after")
    def _under_path(self) -> NestedPassages:
        for key in ("text_field", "start_field"):
            value = getattr(self, key)
            if value is not None and not under(value, self.path):
                raise ValueError(
                    f"search.nested_passages.{key}: {value!r} is not a field under "
                    f"path {self.path!r} (write it as '{self.path}.<name>')"
                )
        return self

    def spec(self) -> NestedPassageSpec:
        return NestedPassageSpec(self.path, self.text_field, self.start_field)


def under(field: str, path: str) -> bool:
    """Whether ``field`` is a field inside the object ``path`` (``path.name``)."""
    return field.startswith(f"{path}.") and len(field) > len(path) + 1


class LuceneSearchKeys(EngineSearchKeys):
    """Elasticsearch and OpenSearch: BM25 over text fields, kNN on a dense_vector field."""

    text_fields: list[str] = Field(default_factory=list, description="'field^boost' allowed")
    collapse_group: bool = False
    highlight: bool = False
    highlight_fragment_size: int = Field(default=300, gt=0)
    nested_passages: NestedPassages | None = None

    def check_keys(
        self, mode: str, *, lexical: bool, dense: bool, vector_field: str | None
    ) -> None:
        if lexical and not self.text_fields:
            raise ValueError(f"search.text_fields is required for mode '{mode}'")
        if dense and not vector_field:
            raise ValueError(f"search.vector_field is required for mode '{mode}'")
        nested = self.nested_passages
        if nested is not None and not (vector_field and under(vector_field, nested.path)):
            raise ValueError(
                "search.nested_passages: the kNN leg searches the passages' vectors, so "
                f"search.vector_field must be a field under path {nested.path!r}"
            )

    def spec_keys(self) -> dict[str, Any]:
        return {
            "text_fields": tuple(self.text_fields),
            "collapse_group": self.collapse_group,
            "highlight": self.highlight,
            "highlight_fragment_size": self.highlight_fragment_size,
            "nested": self.nested_passages.spec() if self.nested_passages else None,
        }
