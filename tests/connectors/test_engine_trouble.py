"""Engine trouble on the wire (docs/protocol.md): a retryable -32603 with data.reason.

Each engine's real client library is pointed at a socket this test owns: a closed
port (nothing listens: engine_unavailable) or a listener that accepts and never
answers (the request deadline passes: deadline_exceeded). No shared node is touched.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.support.wire import assert_valid

pytestmark = pytest.mark.integration


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: a connection is refused


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A listener whose backlog takes connections that are never answered."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


def store(backend: str, port: int, timeout_ms: int) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}"
    if backend == "qdrant":
        return {
            "backend": "qdrant",
            "index": "a2m-test-trouble",
            "connection": {"url": url, "retries": 0},
            "mapping": {"content": "text"},
            "search": {"mode": "lexical", "sparse_vector": "s"},
            "request_timeout_ms": timeout_ms,
        }
    return {
        "backend": backend,
        "index": "a2m-test-trouble",
        "connection": {"hosts": [url], "retries": 0},
        "mapping": {"content": "text"},
        "search": {"text_fields": ["text"]},
        "request_timeout_ms": timeout_ms,
    }


async def error_of(backend: str, port: int, timeout_ms: int) -> dict[str, Any]:
    gateway = Gateway(parse_config({"stores": {"s": store(backend, port, timeout_ms)}}))
    try:
        client = InProcessClient(gateway.dispatcher())
        with pytest.raises(A2MRemoteError) as info:
            await client.call("memory/recall", {"query": "anything"})
        err = {"code": info.value.code, "message": str(info.value), "data": info.value.data}
    finally:
        await gateway.close()
    return err


@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch", "qdrant"])
async def test_unreachable_engine_is_a_retryable_internal_error(backend: str) -> None:
    # A deadline long enough for the refused connection to be the answer.
    err = await error_of(backend, closed_port(), 20_000)
    assert err["code"] == -32603, err
    assert err["data"]["reason"] == "engine_unavailable"
    assert err["data"]["retryable"] is True
    assert err["data"]["retry_after_ms"] > 0
    assert "127.0.0.1" not in str(err)
    assert_valid("error", {"code": err["code"], "message": "m", "data": err["data"]})


@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])
async def test_engine_past_the_deadline_is_a_retryable_internal_error(
    backend: str, black_hole: int
) -> None:
    err = await error_of(backend, black_hole, 400)
    assert err["code"] == -32603, err
    assert err["data"]["reason"] == "deadline_exceeded"
    assert err["data"]["retryable"] is True
    assert_valid("error", {"code": err["code"], "message": "m", "data": err["data"]})
