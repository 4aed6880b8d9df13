"""§3.8: the gateway never dereferences a record's `uri`.

Every record of the store points at a socket this test listens on (by IP, by
`localhost`, over http, https and ftp, with and without a path). A real
`a2m-gateway serve` process answers describe, recall (with a cited `facts` prompt,
which prints the uris), timeline, fetch, `where` on uri and both discovery
documents; the listener must not see a single connection attempt.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.conftest import HttpClient, start_http_server
from tests.security.support import SPARSE, write_qdrant

pytestmark = pytest.mark.integration


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    yield sock
    sock.close()


def uris(port: int) -> list[str]:
    return [
        f"http://127.0.0.1:{port}/reports/q3.pdf",
        f"https://127.0.0.1:{port}/slides/deck.pptx",
        f"http://localhost:{port}/images/diagram.png",
        f"ftp://127.0.0.1:{port}/archive/data.csv",
        f"//127.0.0.1:{port}/relative/notes.md",
        f"http://127.0.0.1:{port}",
    ]


def test_uris_are_never_fetched(listener: socket.socket, tmp_path: Path) -> None:
    port = listener.getsockname()[1]
    docs: list[tuple[int, dict[str, Any]]] = [
        (
            i + 1,
            {
                "text": f"quarterly report {i} about the deploy pipeline",
                "uri": uri,
                "key": f"ext/{i}",
                "created_at": f"2026-01-01T00:00:{i:02d}Z",
            },
        )
        for i, uri in enumerate(uris(port))
    ]
    qdrant = tmp_path / "qdrant"
    write_qdrant(qdrant, "external", docs, "text")
    config = {
        "stores": {
            "ext": {
                "backend": "qdrant",
                "index": "external",
                "connection": {"path": str(qdrant)},
                "mapping": {
                    "content": "text",
                    "uri": "uri",
                    "media_type_from_uri": True,
                    "key": "key",
                    "created_at": "created_at",
                },
                "search": {"mode": "lexical", "sparse_vector": SPARSE},
            }
        }
    }
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(yaml.safe_dump(config))
    server = start_http_server(tmp_path / "data", cfg)
    client = HttpClient(server.base_url, "/a2m/ext")
    try:
        d = client.call("memory/describe", {"protocol": "a2m/0.1"})
        assert "external" in d["capabilities"]
        got = client.call(
            "memory/recall",
            {"query": "quarterly report", "limit": 50, "prompt": {"style": "facts", "cite": True}},
        )
        assert {r["uri"] for r in got["records"]} == set(uris(port))
        assert str(port) in got["prompt"]
        assert client.call("memory/recall", {"limit": 50})["records"]
        tl = client.call(
            "memory/timeline", {"limit": 50, "prompt": {"style": "facts", "cite": True}}
        )
        assert len(tl["records"]) == len(docs)
        for _, doc in docs:
            record = client.call("memory/fetch", {"key": doc["key"]})["record"]
            assert record["uri"] == doc["uri"]
            same = client.call("memory/recall", {"where": {"uri": doc["uri"]}, "limit": 5})
            assert [r["uri"] for r in same["records"]] == [doc["uri"]]
        media = {r["uri"]: r.get("media_type") for r in tl["records"]}
        assert media[uris(port)[0]] == "application/pdf"  # from the extension, not the server
        for path in ("/.well-known/a2m-server.json", "/a2m/ext/.well-known/a2m-server.json"):
            assert client.http.get(path).status_code == 200
    finally:
        client.close()
        server.stop()
    # Anything the gateway started in the background has had every call's lifetime and the
    # shutdown to connect; wait a little longer on the socket itself, then look.
    readable, _, _ = select.select([listener], [], [], 1.0)
    assert readable == [], "the gateway connected to a record's uri"
    with pytest.raises(BlockingIOError):
        listener.accept()
