"""Pick a connector from the spec's backend; engine clients are imported lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.base import Connector

if TYPE_CHECKING:
    from connectors.spec import ConnectorSpec


def make_connector(spec: ConnectorSpec) -> Connector:
    """Build the connector for one store (nothing is contacted until open())."""
    backend = spec.backend
    if backend == "qdrant":
        from connectors.qdrant.connector import QdrantConnector

        return QdrantConnector(spec)
    if backend in ("elasticsearch", "opensearch"):
        from connectors.lucene.connector import LuceneConnector

        return LuceneConnector(spec)
    raise ValueError(f"unknown backend {backend!r}")
