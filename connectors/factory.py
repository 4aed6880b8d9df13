"""Pick a connector from the store's `backend:`; engine clients are imported lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.base import Connector

if TYPE_CHECKING:
    from gateway.config import StoreConfig


def make_connector(config: StoreConfig) -> Connector:
    """Build the connector for one store (nothing is contacted until open())."""
    backend = config.backend.value
    if backend == "qdrant":
        from connectors.qdrant import QdrantConnector

        return QdrantConnector(config)
    if backend == "elasticsearch":
        from connectors.elasticsearch import ElasticsearchConnector

        return ElasticsearchConnector(config)
    if backend == "opensearch":
        from connectors.opensearch import OpenSearchConnector

        return OpenSearchConnector(config)
    raise ValueError(f"unknown backend {backend!r}")
