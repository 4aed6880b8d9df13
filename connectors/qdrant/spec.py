"""How the Qdrant connector reaches its engine: plain, frozen values.

Built by :class:`connectors.qdrant.config.QdrantConnection`; read by the connector.
"""

from __future__ import annotations

from dataclasses import dataclass

from connectors.spec import ConnectionSpec, ConnectorSpec, Secret


@dataclass(frozen=True, slots=True)
class QdrantConnectionSpec(ConnectionSpec):
    """A Qdrant server (``url``), or qdrant-edge in this process (``path``, ``location``)."""

    url: str | None = None
    path: str | None = None
    location: str | None = None
    api_key: Secret | None = None
    access_token: Secret | None = None
    prefer_grpc: bool = False
    grpc_port: int = 6334
    ca_certs: str | None = None
    verify_certs: bool = True

    @property
    def local(self) -> bool:
        """Qdrant's own engine in this process (qdrant-edge), not a server."""
        return self.url is None


QdrantSpec = ConnectorSpec[QdrantConnectionSpec]
"""A Qdrant store's connector spec."""


def has_vectors(spec: QdrantSpec) -> bool:
    """The collection must hold a dense vector: a named one, or the default one any mode
    but lexical reads."""
    return spec.search.vector_field is not None or spec.search.mode != "lexical"
