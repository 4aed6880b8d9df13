"""Shared fixtures: where the real engines are, and the SciFact collection.

Engines are started outside pytest by ``tests/engines/engines.py start`` (the
test command in README.md does it) and found through A2M_TEST_*_URL. A missing
engine or a missing SciFact file skips its tests on a developer's machine, but
fails them when A2M_REQUIRE_ENGINES=1 (set by the test command) or CI is set,
so CI can never pass by skipping. The one exception is a Qdrant server: no
registry ships one, so its tests run where A2M_TEST_QDRANT_URL names one and
skip otherwise (A2M_REQUIRE_QDRANT=1 makes that a failure); CI covers the
server code paths with the wire doubles of ``tests/support/qdrant_wire``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.http_peer import HttpPeer, PeerHandler, StartPeer
from tests.support.redis_server import RedisServer, redis_server_binary

SCIFACT_DEFAULT = "../shared/data/scifact"
"""Where the collection is looked for unless A2M_SCIFACT_DIR says: beside the checkout."""
SCIFACT_DIR = Path(
    os.environ.get("A2M_SCIFACT_DIR") or Path(__file__).resolve().parents[1] / SCIFACT_DEFAULT
)
SCIFACT_FILES = (
    "corpus.jsonl",
    "corpus-ids.txt",
    "corpus-minilm.npy",
    "queries-train.jsonl",
    "queries-train-ids.txt",
    "queries-train-minilm.npy",
    "qrels/train.tsv",
)
"""Every file a test reads from the collection (tests/support/scifact.py and the embedder test)."""


def must_not_skip() -> bool:
    """True where a missing prerequisite is a failure: the test command and CI."""
    ci = os.environ.get("CI", "").strip().lower()
    return os.environ.get("A2M_REQUIRE_ENGINES") == "1" or ci not in ("", "0", "false", "no")


def missing(reason: str) -> None:
    """Skip on a developer's machine, fail under the test command or CI."""
    if must_not_skip():
        pytest.fail(f"{reason} (A2M_REQUIRE_ENGINES=1 or CI is set: a failure, not a skip)")
    pytest.skip(reason)


def _engine_url(var: str) -> str:
    url = os.environ.get(var)
    if not url:
        missing(f"{var} not set (start engines with: python tests/engines/engines.py start)")
    assert url
    return url


def lucene_node(name: str) -> tuple[str, str]:
    """(backend, URL) of the running node ``name`` of tests/engines/engines.py
    (``elasticsearch9``, ``opensearch3``, ...); a skip, or a failure under CI, when its
    URL is not set."""
    backend = "elasticsearch" if name.startswith("elastic") else "opensearch"
    return backend, _engine_url(f"A2M_TEST_{name.upper()}_URL")


@pytest.fixture(scope="session")
def opensearch_url() -> str:
    return _engine_url("A2M_TEST_OPENSEARCH_URL")


@pytest.fixture(scope="session")
def elasticsearch_url() -> str:
    return _engine_url("A2M_TEST_ELASTICSEARCH_URL")


@pytest.fixture(scope="session")
def keycloak_url() -> str:
    """The Keycloak of tests/engines/engines.py (realms of tests/engines/keycloak-realm.json)."""
    return _engine_url("A2M_TEST_KEYCLOAK_URL").rstrip("/")


@dataclass(frozen=True)
class QdrantServer:
    """The Qdrant server of tests/engines/engines.py: where it listens and its keys."""

    url: str
    grpc_port: int
    api_key: str
    read_only_api_key: str


QDRANT_SKIP = (
    "no Qdrant server named: A2M_TEST_QDRANT_URL is unset (no registry ships a Qdrant server; "
    'to run these tests against one, see docs/engines.md, "A Qdrant server")'
)
"""The one reason every real-server test gives where the environment names no server."""


def named_qdrant_server() -> QdrantServer | None:
    """The Qdrant server that A2M_TEST_QDRANT_URL and its companions name, or None.

    Fails the test where A2M_REQUIRE_QDRANT=1 and none is named, or where a named server
    lacks its gRPC port or keys.
    """
    url = os.environ.get("A2M_TEST_QDRANT_URL")
    if not url:
        if os.environ.get("A2M_REQUIRE_QDRANT") == "1":
            pytest.fail(f"{QDRANT_SKIP} (A2M_REQUIRE_QDRANT=1: a failure, not a skip)")
        return None
    keys = ("A2M_TEST_QDRANT_GRPC_PORT", "A2M_TEST_QDRANT_API_KEY")
    absent = [
        var for var in (*keys, "A2M_TEST_QDRANT_READ_ONLY_API_KEY") if not os.environ.get(var)
    ]
    if absent:
        pytest.fail(f'{", ".join(absent)} not set (eval "$(python tests/engines/engines.py env)")')
    return QdrantServer(
        url=url,
        grpc_port=int(os.environ["A2M_TEST_QDRANT_GRPC_PORT"]),
        api_key=os.environ["A2M_TEST_QDRANT_API_KEY"],
        read_only_api_key=os.environ["A2M_TEST_QDRANT_READ_ONLY_API_KEY"],
    )


@pytest.fixture(scope="session")
def qdrant_server() -> QdrantServer:
    """The Qdrant server the environment names; skips where none is named (CI has none)."""
    server = named_qdrant_server()
    if server is None:
        pytest.skip(QDRANT_SKIP)
    return server


@pytest.fixture(scope="session")
def qdrant_member() -> QdrantServer | None:
    """For suites spanning engines (federations, MCP): the Qdrant server the environment names,
    or None where none is named, and the Qdrant member then runs on the embedded store."""
    return named_qdrant_server()


def scifact_missing(root: Path) -> list[str]:
    return [name for name in SCIFACT_FILES if not (root / name).is_file()]


def scifact_where(explicit: str | None) -> str:
    """Where SciFact was looked for, in the reader's terms: the variable, or beside the checkout
    (never this machine's absolute path outside the repository)."""
    if explicit:
        return f"A2M_SCIFACT_DIR={explicit}"
    return f"{SCIFACT_DEFAULT}, beside the checkout (set A2M_SCIFACT_DIR to put it elsewhere)"


@pytest.fixture(scope="session")
def scifact_dir() -> Path:
    absent = scifact_missing(SCIFACT_DIR)
    if absent:
        where = scifact_where(os.environ.get("A2M_SCIFACT_DIR"))
        missing(f"SciFact incomplete: no {', '.join(absent)} in {where}")
    return SCIFACT_DIR


@pytest.fixture
def http_peer() -> Iterator[StartPeer]:
    """Start loopback HTTP peers (tests/support/http_peer.py); all are closed after the test."""
    peers: list[HttpPeer] = []

    def start(handler: PeerHandler) -> HttpPeer:
        peers.append(HttpPeer(handler))
        return peers[-1]

    yield start
    for peer in peers:
        peer.close()


@pytest.fixture
def idle_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server (tests/support/redis_server.py), not started; stopped after."""
    if redis_server_binary() is None:
        missing("redis-server not on PATH (scripts/test installs the Debian package)")
    server = RedisServer(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server(idle_redis_server: RedisServer) -> RedisServer:
    """A private redis-server, started."""
    idle_redis_server.start()
    return idle_redis_server
