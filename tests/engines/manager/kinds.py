"""Which fetcher and launcher serve each kind of node, and what version a started node runs."""

from __future__ import annotations

from tests.engines.manager.fetch import fetch_elasticsearch, fetch_opensearch
from tests.engines.manager.keycloak import fetch_keycloak, launch_keycloak
from tests.engines.manager.launching import Launch
from tests.engines.manager.lucene import launch_elasticsearch, launch_opensearch
from tests.engines.manager.nodes import ELASTICSEARCH, HOST, KEYCLOAK, NODES, OPENSEARCH, QDRANT
from tests.engines.manager.qdrant import fetch_qdrant, launch_qdrant, qdrant_request
from tests.engines.manager.rest import node_version

LAUNCHERS = {
    OPENSEARCH: launch_opensearch,
    ELASTICSEARCH: launch_elasticsearch,
    QDRANT: launch_qdrant,
    KEYCLOAK: launch_keycloak,
}
FETCHERS = {
    OPENSEARCH: fetch_opensearch,
    ELASTICSEARCH: fetch_elasticsearch,
    QDRANT: fetch_qdrant,
    KEYCLOAK: fetch_keycloak,
}


def launch(name: str, port: int, fresh: bool) -> Launch:
    node = NODES[name]
    return LAUNCHERS[node.kind](node, port, fresh)


def kind_of(name: str) -> str | None:
    """The kind of a node of NODES; None for a member of a local cluster (opensearch3-c1)."""
    node = NODES.get(name)
    return node.kind if node is not None else None


def version_of(launch: Launch) -> str:
    if kind_of(launch.name) == KEYCLOAK:
        return NODES[launch.name].version
    if kind_of(launch.name) != QDRANT:
        return node_version(launch.port)
    entry = {"url": f"http://{HOST}:{launch.port}", **launch.extra}
    return str(qdrant_request(entry, "GET", "/")["version"])
