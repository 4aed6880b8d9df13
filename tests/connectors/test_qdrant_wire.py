"""A Qdrant server store's code paths in CI, over REST and gRPC, against the wire doubles.

No Qdrant server runs here (test_qdrant_server.py needs one the environment names),
so ``tests/support/qdrant_wire`` answers on real sockets what a server answers:
these tests check what the connector and the gateway make of each answer. The
credential travels on every call; each refusal (401, 403, 404, 408, 429 with
Retry-After, 5xx, strict mode's two refusals, and their gRPC status twins)
becomes the connector's error, retried only where a retry can help; a server that
never answers is a timeout; TLS is trusted only through ``ca_certs``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import OrderedRequest, SearchRequest
from connectors.errors import (
    ConnectorError,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
)
from connectors.qdrant.connector import QdrantConnector
from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.connectors.specs import spec_of
from tests.support.certs import write_self_signed
from tests.support.qdrant_wire import COLLECTION, HANG, SPARSE, Refusal, WireQdrant, serve_wire

KEY = "wire-test-key-6f1c"
TRANSPORTS = ["rest", "grpc"]


@pytest.fixture
def wire() -> Iterator[WireQdrant]:
    yield from serve_wire()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def store(wire: WireQdrant, transport: str, **connection: Any) -> dict[str, Any]:
    conn: dict[str, Any] = {"url": wire.url, "api_key": KEY, "retries": 2}
    if transport == "grpc":
        conn.update(prefer_grpc=True, grpc_port=wire.grpc_port)
    conn.update(connection)
    return {
        "backend": "qdrant",
        "index": COLLECTION,
        "connection": {k: v for k, v in conn.items() if v is not None},
        "mapping": {"content": "text", "key": "key", "group": "group", "created_at": "created_at"},
        "search": {"mode": "lexical", "sparse_vector": SPARSE},
        "request_timeout_ms": 5_000,
    }


def connector(wire: WireQdrant, transport: str, **connection: Any) -> QdrantConnector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return QdrantConnector(spec_of(store(wire, transport, **connection)))


# -- reads and credentials ------------------------------------------------------------------------


@pytest.mark.parametrize("credential", ["api_key", "access_token"])
async def test_a_store_opens_reads_and_sends_its_credential_on_every_call(
    wire: WireQdrant, transport: str, credential: str
) -> None:
    over = {"api_key": None, "access_token": KEY} if credential == "access_token" else {}
    c = connector(wire, transport, **over)
    try:
        info = await c.open()
        assert info.engine == "qdrant 1.18.3"
        assert info.lexical is True
        hits = await c.search(SearchRequest(limit=3, text="harbour tides"))
        assert [h.id for h in hits] == ["1", "2", "3"]
        assert hits[0].source["key"] == "notes/0"
        newest = await c.ordered(OrderedRequest(limit=3))
        assert {h.source["key"] for h in newest} == {"notes/0", "notes/1", "notes/2"}
        assert await c.ping() is True
    finally:
        await c.close()
    assert {"info", "collection", "query", "scroll", "exists"} <= set(wire.script.calls)
    assert wire.script.credentials == [KEY] * len(wire.script.calls)


async def test_a_store_without_a_credential_sends_none(wire: WireQdrant, transport: str) -> None:
    c = connector(wire, transport, api_key=None)
    try:
        await c.open()
    finally:
        await c.close()
    assert wire.script.credentials
    assert set(wire.script.credentials) == {None}


# -- refusals -------------------------------------------------------------------------------------

BAD_CREDENTIALS = (
    "qdrant refused the gateway's credentials (connection.api_key or connection.access_token)"
)
NO_ACCESS = (
    "the qdrant credentials do not grant access to the collection named by index "
    "(an access token for another collection, or an expired one)"
)
MISSING_INDEX = (
    "qdrant's strict mode refused a filter on a field without a payload index "
    "(`a2m-gateway check` lists the indexes the mapping needs)"
)
REFUSALS = [
    pytest.param(Refusal(401, "Invalid api-key"), EngineConfigError, BAD_CREDENTIALS, 1, id="401"),
    pytest.param(
        Refusal(403, "Access denied: collection access is required"),
        EngineConfigError,
        NO_ACCESS,
        1,
        id="403",
    ),
    pytest.param(
        Refusal(404, f"Not found: Collection `{COLLECTION}` doesn't exist!"),
        EngineConfigError,
        "the qdrant collection named by index does not exist",
        1,
        id="404",
    ),
    pytest.param(
        Refusal(408, "Timeout error: Operation 'Search' timed out after 1 seconds"),
        EngineTimeout,
        "qdrant timed out the request (server-side timeout)",
        1,
        id="408",
    ),
    pytest.param(
        Refusal(429, "Too many requests: rate limiter hit", retry_after="2"),
        EngineUnavailable,
        "qdrant is rate limiting",
        3,
        id="429",
    ),
    pytest.param(Refusal(500, "Service internal error"), EngineUnavailable, None, 3, id="500"),
    pytest.param(
        Refusal(503, "Service unavailable", retry_after="2"), EngineUnavailable, None, 3, id="503"
    ),
    pytest.param(
        Refusal(
            400,
            'Bad request: Index required but not found for "colour" of one of the following '
            "types: [keyword]. Help: Create an index for this key or use a different filter.",
        ),
        EngineConfigError,
        MISSING_INDEX,
        1,
        id="strict-unindexed-filter",
    ),
    pytest.param(
        Refusal(400, 'Bad request: Limit exceeded 30 > 20 for "limit"'),
        EngineRejected,
        "qdrant refused the request (400)",
        1,
        id="strict-limit",
    ),
]


@pytest.mark.parametrize(("refusal", "error", "message", "asked"), REFUSALS)
async def test_each_refusal_of_a_query_becomes_the_connectors_error(
    wire: WireQdrant,
    transport: str,
    refusal: Refusal,
    error: type[ConnectorError],
    message: str | None,
    asked: int,
) -> None:
    c = connector(wire, transport, retries=2)
    try:
        await c.open()
        wire.script.refusals["query"] = refusal
        with pytest.raises(ConnectorError) as err:
            await c.search(SearchRequest(limit=3, text="harbour"))
    finally:
        await c.close()
    assert type(err.value) is error
    said = str(err.value)
    if message is None:
        # The status travels in the message on REST; gRPC names the mapped status too.
        assert said == f"qdrant answered {refusal.status}"
    else:
        assert said == message
    if refusal.retry_after is not None:
        assert err.value.retry_after_ms == int(refusal.retry_after) * 1000  # type: ignore[attr-defined]
    assert wire.script.calls.count("query") == asked  # transient ones: a try and two retries
    assert wire.url.split("//")[1] not in said
    assert KEY not in said


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_a_refusal_at_open_is_not_retried(
    wire: WireQdrant, transport: str, status: int
) -> None:
    wire.script.refusals["collection"] = Refusal(status)
    c = connector(wire, transport, retries=5)
    started = time.monotonic()
    with pytest.raises(EngineConfigError):
        await c.open()
    await c.close()
    assert time.monotonic() - started < 2
    assert wire.script.calls.count("collection") == 1


async def test_a_server_that_never_answers_is_a_timeout(wire: WireQdrant, transport: str) -> None:
    c = connector(wire, transport, retries=3, timeout_ms=500)
    try:
        await c.open()
        wire.script.refusals["query"] = HANG
        started = time.monotonic()
        with pytest.raises(EngineTimeout) as err:
            await c.search(SearchRequest(limit=3, text="harbour"))
        assert time.monotonic() - started < 4
    finally:
        wire.script.release.set()
        await c.close()
    assert "127.0.0.1" not in str(err.value)


# -- through the gateway: the A2M error a caller sees ---------------------------------------------


async def recall_error(wire: WireQdrant, transport: str, refusal: Refusal) -> A2MRemoteError:
    config = parse_config({"stores": {"s": store(wire, transport, retries=0)}})
    gateway = Gateway(config)
    try:
        client = InProcessClient(gateway.dispatcher())
        await client.call("memory/recall", {"query": "harbour"})  # opens the store: a control
        wire.script.refusals["query"] = refusal
        with pytest.raises(A2MRemoteError) as err:
            await client.call("memory/recall", {"query": "harbour"})
        return err.value
    finally:
        await gateway.close()


async def test_the_servers_rate_limit_reaches_the_caller_as_retryable(
    wire: WireQdrant, transport: str
) -> None:
    err = await recall_error(wire, transport, Refusal(429, "Too many requests", retry_after="30"))
    assert err.code == -32603
    assert err.data is not None
    assert err.data["reason"] == "engine_unavailable"
    assert err.data["retryable"] is True
    assert err.data["retry_after_ms"] == 30_000


async def test_a_strict_mode_limit_refusal_reaches_the_caller_as_invalid_params(
    wire: WireQdrant, transport: str
) -> None:
    err = await recall_error(wire, transport, Refusal(400, "Bad request: Limit exceeded 30 > 20"))
    assert err.code == -32602
    assert err.data is not None
    assert err.data["retryable"] is False
    assert "Limit exceeded" not in str(err)


# -- TLS ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_self_signed(tmp_path_factory.mktemp("qdrant-wire-tls"), "qdrant")


@pytest.fixture
def tls_wire(tls_files: tuple[Path, Path]) -> Iterator[WireQdrant]:
    yield from serve_wire(tls=tls_files)


async def reads(c: QdrantConnector) -> list[str]:
    try:
        await c.open()
        return [h.id for h in await c.search(SearchRequest(limit=3, text="harbour tides"))]
    finally:
        await c.close()


async def test_a_store_trusting_the_servers_certificate_reads(
    tls_wire: WireQdrant, tls_files: tuple[Path, Path], transport: str
) -> None:
    c = connector(tls_wire, transport, ca_certs=str(tls_files[0]))
    assert await reads(c) == ["1", "2", "3"]
    assert set(tls_wire.script.credentials) == {KEY}


async def test_an_untrusted_certificate_fails_open_with_a_sentence_not_the_host(
    tls_wire: WireQdrant, transport: str
) -> None:
    with pytest.raises(EngineConfigError) as info:
        await reads(connector(tls_wire, transport, retries=3))
    assert str(info.value) == (
        "the qdrant server's TLS certificate is not trusted "
        "(connection.ca_certs names the CA that signed it)"
    )
    assert "127.0.0.1" not in str(info.value)
    assert str(tls_wire.grpc_port) not in str(info.value)
    assert tls_wire.script.calls == []  # the handshake failed: no request was answered


async def test_verify_certs_false_reads_over_rest(tls_wire: WireQdrant) -> None:
    assert await reads(connector(tls_wire, "rest", verify_certs=False)) == ["1", "2", "3"]
