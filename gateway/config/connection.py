"""How to reach each engine: one connection model per backend, each refusing the others' keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from connectors.http_answer import AnswerLimits
from gateway.config.base import StrictModel

DEFAULT_LIMITS = AnswerLimits()


class _Transport(StrictModel):
    """Timeouts, pool and retries: every backend has them."""

    timeout_ms: int = Field(default=10_000, gt=0)
    pool_maxsize: int = Field(default=32, gt=0)
    retries: int = Field(default=3, ge=0, le=10)


class _LuceneConnection(_Transport):
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


class ElasticsearchConnection(_LuceneConnection):
    cloud_id: SecretStr | None = Field(default=None, description="Elastic Cloud, instead of hosts")

    def _check_target(self) -> None:
        if not (self.hosts or self.cloud_id):
            raise ValueError("connection: an elasticsearch store needs hosts or cloud_id")
        if self.sniff and self.cloud_id is not None:
            raise ValueError("connection.sniff: Elastic Cloud is reached through its proxy only")


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


class QdrantConnection(_Transport):
    """A Qdrant server (``url``), or qdrant-edge in this process (``path``, ``location``)."""

    url: str | None = Field(default=None, description="a Qdrant server (REST port in the URL)")
    path: str | None = Field(
        default=None, description="a directory of qdrant-edge shards, one per index"
    )
    location: str | None = Field(
        default=None, description="':memory:': a private temporary qdrant-edge shard"
    )
    api_key: SecretStr | None = None
    access_token: SecretStr | None = Field(
        default=None, description="a Qdrant JWT access token (read-only or per collection)"
    )
    prefer_grpc: bool = Field(default=False, description="reads over gRPC instead of REST")
    grpc_port: int = Field(default=6334, gt=0, lt=65536)
    ca_certs: str | None = Field(
        default=None, description="PEM bundle the server's TLS is checked with"
    )
    verify_certs: bool = True

    @property
    def local(self) -> bool:
        """The engine runs in this process (qdrant-edge)."""
        return self.url is None

    @model_validator(mode="after")
    def _one_target(self) -> QdrantConnection:
        if sum([bool(self.url), bool(self.path), bool(self.location)]) != 1:
            raise ValueError("connection: a qdrant store needs exactly one of url, path, location")
        if self.api_key is not None and self.access_token is not None:
            raise ValueError("connection: choose one of api_key, access_token")
        server_only = {
            "api_key": self.api_key is not None,
            "access_token": self.access_token is not None,
            "prefer_grpc": self.prefer_grpc,
            "ca_certs": self.ca_certs is not None,
            "verify_certs": not self.verify_certs,
        }
        given = [key for key, set_ in server_only.items() if set_]
        if self.url is None and given:
            raise ValueError(f"connection: {', '.join(given)} apply to a qdrant server (url) only")
        if self.prefer_grpc and not self.verify_certs:
            raise ValueError(
                "connection: verify_certs false is for REST only (gRPC always checks TLS)"
            )
        return self


ConnectionConfig = ElasticsearchConnection | OpenSearchConnection | QdrantConnection
"""Any store's connection (a type for annotations; each store model holds its own)."""
