"""Engine connectors: Elasticsearch, OpenSearch and Qdrant behind one async Protocol."""

from connectors.base import Connector
from connectors.factory import make_connector

__all__ = ["Connector", "make_connector"]
