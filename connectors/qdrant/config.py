"""How to reach Qdrant: a server over REST or gRPC, or qdrant-edge in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, SecretStr, model_validator

from connectors.config import EngineConnection, EngineSearchKeys, secret
from connectors.qdrant.spec import QdrantConnectionSpec


class QdrantConnection(EngineConnection):
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

    def one_process_only(self) -> str | None:
        if self.path is None:
            return None
        return (
            "use a qdrant shard on disk (one process per shard): serve a Qdrant server "
            "(connection.url) or run one worker"
        )

    def relative_to(self, base_dir: Path) -> Self:
        if self.path and not Path(self.path).is_absolute():
            return self.model_copy(update={"path": str((base_dir / self.path).resolve())})
        return self

    def target(self) -> str | None:
        if self.path is not None:
            return f"qdrant-edge at {self.path}"
        if self.location is not None:
            return f"qdrant-edge in {self.location}"
        return None

    def urls(self) -> list[str]:
        return [self.url] if self.url is not None else []

    def spec(self) -> QdrantConnectionSpec:
        return QdrantConnectionSpec(
            url=self.url,
            path=self.path,
            location=self.location,
            api_key=secret(self.api_key),
            access_token=secret(self.access_token),
            prefer_grpc=self.prefer_grpc,
            grpc_port=self.grpc_port,
            ca_certs=self.ca_certs,
            verify_certs=self.verify_certs,
            timeout_ms=self.timeout_ms,
            pool_maxsize=self.pool_maxsize,
            retries=self.retries,
        )


class QdrantSearchKeys(EngineSearchKeys):
    """Qdrant: lexical is a named sparse vector; dense is the named (or default) vector."""

    sparse_vector: str | None = Field(default=None, description="Qdrant named sparse vector")
    sparse_analyzer: Literal["light", "english"] = Field(
        default="light",
        description="how query text becomes sparse terms; must be the analyzer the collection "
        "was indexed with (connectors.qdrant.sparse)",
    )

    def check_keys(
        self, mode: str, *, lexical: bool, dense: bool, vector_field: str | None
    ) -> None:
        if lexical and not self.sparse_vector:
            raise ValueError(
                f"search.sparse_vector is required for mode '{mode}' on qdrant "
                "(lexical search on qdrant is a sparse vector)"
            )

    def spec_keys(self) -> dict[str, Any]:
        return {"sparse_vector": self.sparse_vector, "sparse_analyzer": self.sparse_analyzer}
