"""MCP tests reuse the conformance suite's real servers: one `a2m-gateway serve` per backend.

The embedded demo (qdrant-edge) and the packaged demo corpus bulk-loaded
into the Elasticsearch and OpenSearch nodes, each served by a real process
whose MCP endpoint is the one under test.
"""

from __future__ import annotations

from tests.conformance.conftest import (  # noqa: F401  (fixtures)
    backend,
    http_client,
    http_server,
    servers,
)
