"""What only a Qdrant server does, on the server of tests/engines/engines.py, over REST and gRPC.

Credentials (API key, read-only key, JWT access tokens), aliases, strict mode,
payload indexes, its 429 with Retry-After, a stopped server, and faults
injected by a proxy in front of it. Each test that takes ``transport`` runs on
both protocols: the client's code paths and the server's error encodings
(HTTP status and JSON body, gRPC status and details) differ between them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import yaml

from bench.soak.proxy import Fault, relay_to
from connectors.base import Condition, Filter, OrderedRequest, SearchRequest
from connectors.errors import EngineConfigError, EngineRejected, EngineUnavailable
from connectors.qdrant.connector import QdrantConnector
from connectors.qdrant.sparse import LexicalSparseEncoder
from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.conftest import QdrantServer
from tests.connectors.specs import spec_of
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

COLLECTION = "a2m-test-server"
STRICT = "a2m-test-server-strict"
LIMITED = "a2m-test-server-rate"
SPARSE = "text-sparse"
TRANSPORTS = ["rest", "grpc"]
DOCS = [
    {
        "text": f"note {i} about harbour cranes and {'tides' if i % 2 else 'ships'}",
        "key": f"notes/g{i % 3}/{i}",
        "group": f"g{i % 3}",
        "created_at": f"2026-01-01T00:{i:02d}:00Z",
        "colour": "red" if i % 2 else "blue",
    }
    for i in range(30)
]


def admin(server: QdrantServer) -> Any:
    from qdrant_client import QdrantClient

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an api key over http, on loopback
        return QdrantClient(
            url=server.url, api_key=server.api_key, timeout=30, check_compatibility=False
        )


def create(client: Any, name: str, *, indexes: dict[str, Any], strict: Any = None) -> None:
    """(Re)create ``name`` holding DOCS with a lexical sparse vector and the given indexes."""
    from qdrant_client import models

    if client.collection_exists(name):
        client.delete_collection(name)
    client.create_collection(
        name,
        vectors_config={},
        sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    encoder = LexicalSparseEncoder(avgdl=8.0)
    points = []
    for i, doc in enumerate(DOCS):
        sv = encoder.encode_document(str(doc["text"]))
        vector = models.SparseVector(indices=list(sv.indices), values=list(sv.values))
        points.append(models.PointStruct(id=i + 1, vector={SPARSE: vector}, payload=doc))
    client.upsert(name, points=points, wait=True)
    for field, schema in indexes.items():
        client.create_payload_index(name, field, schema, wait=True)
    if strict is not None:
        client.update_collection(name, strict_mode_config=strict)


INDEXES = {"created_at": "datetime", "key": "keyword", "group": "keyword"}


@pytest.fixture(scope="module")
def server(qdrant_server: QdrantServer) -> Iterator[QdrantServer]:
    from qdrant_client import models

    client = admin(qdrant_server)
    try:
        create(client, COLLECTION, indexes=INDEXES)
        client.update_collection_aliases(
            change_aliases_operations=[
                models.CreateAliasOperation(
                    create_alias=models.CreateAlias(
                        collection_name=COLLECTION, alias_name="a2m-test-alias"
                    )
                )
            ]
        )
        strict = models.StrictModeConfig(
            enabled=True, unindexed_filtering_retrieve=False, max_query_limit=20
        )
        create(client, STRICT, indexes=INDEXES, strict=strict)
        yield qdrant_server
    finally:
        client.close()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def connection(server: QdrantServer, transport: str, **over: Any) -> dict[str, Any]:
    conn: dict[str, Any] = {"url": server.url, "api_key": server.api_key, "retries": 2}
    if transport == "grpc":
        conn.update(prefer_grpc=True, grpc_port=server.grpc_port)
    conn.update(over)
    return {k: v for k, v in conn.items() if v is not None}


def store_data(
    server: QdrantServer, transport: str, index: str = COLLECTION, **conn: Any
) -> dict[str, Any]:
    return {
        "backend": "qdrant",
        "index": index,
        "connection": connection(server, transport, **conn),
        "mapping": {"content": "text", "key": "key", "group": "group", "created_at": "created_at"},
        "search": {"mode": "lexical", "sparse_vector": SPARSE},
    }


def connector(server: QdrantServer, transport: str, **kw: Any) -> QdrantConnector:
    return QdrantConnector(spec_of(store_data(server, transport, **kw)))


@pytest.fixture
async def conn(server: QdrantServer, transport: str) -> AsyncIterator[QdrantConnector]:
    c = connector(server, transport)
    await c.open()
    try:
        yield c
    finally:
        await c.close()


def token(server: QdrantServer, access: Any) -> str:
    """A Qdrant JWT access token, signed with the server's API key as Qdrant's RBAC expects."""
    claims = {"exp": int(time.time()) + 3600, "access": access}
    return jwt.encode(claims, server.api_key, algorithm="HS256")


async def opens_and_reads(c: QdrantConnector) -> list[str]:
    info = await c.open()
    try:
        assert info.engine == "qdrant 1.18.3"
        assert info.lexical is True
        hits = await c.search(SearchRequest(limit=5, text="harbour tides"))
        return [h.id for h in hits]
    finally:
        await c.close()


# -- credentials -----------------------------------------------------------------------------


async def test_the_api_key_and_the_read_only_key_both_read(
    server: QdrantServer, transport: str
) -> None:
    full = await opens_and_reads(connector(server, transport))
    read_only = await opens_and_reads(
        connector(server, transport, api_key=server.read_only_api_key)
    )
    assert len(full) == 5
    assert read_only == full


async def test_a_bad_api_key_fails_open_with_a_clear_sentence(
    server: QdrantServer, transport: str
) -> None:
    c = connector(server, transport, api_key="not-the-key", retries=5)
    started = time.monotonic()
    with pytest.raises(EngineConfigError) as err:
        await c.open()
    assert time.monotonic() - started < 2  # refused once, not retried five times with backoff
    assert str(err.value) == (
        "qdrant refused the gateway's credentials (connection.api_key or connection.access_token)"
    )
    assert "not-the-key" not in str(err.value)
    await c.close()


async def test_a_bad_api_key_is_asked_once(server: QdrantServer) -> None:
    async with relay_to(server.url) as proxy:
        c = QdrantConnector(
            spec_of(store_data(server, "rest", url=proxy.url, api_key="not-the-key", retries=5))
        )
        with pytest.raises(EngineConfigError):
            await c.open()
        await c.close()
        assert proxy.requests == 1


@pytest.mark.parametrize(
    "access",
    [
        "r",
        [{"collection": COLLECTION, "access": "r"}],
        [{"collection": COLLECTION, "access": "rw"}],
    ],
)
async def test_an_access_token_for_the_collection_reads(
    server: QdrantServer, transport: str, access: Any
) -> None:
    c = connector(server, transport, api_key=None, access_token=token(server, access))
    assert len(await opens_and_reads(c)) == 5


async def test_an_access_token_for_another_collection_fails_open_with_a_clear_sentence(
    server: QdrantServer, transport: str
) -> None:
    other = token(server, [{"collection": STRICT, "access": "r"}])
    c = connector(server, transport, api_key=None, access_token=other)
    with pytest.raises(EngineConfigError) as err:
        await c.open()
    assert str(err.value).startswith(
        "the qdrant credentials do not grant access to the collection named by index"
    )
    await c.close()


async def test_an_expired_access_token_is_refused(server: QdrantServer, transport: str) -> None:
    claims = {"exp": int(time.time()) - 60, "access": "r"}
    expired = jwt.encode(claims, server.api_key, algorithm="HS256")
    c = connector(server, transport, api_key=None, access_token=expired, retries=5)
    with pytest.raises(EngineConfigError, match="an expired one"):
        await c.open()
    await c.close()


# -- collections, aliases, indexes --------------------------------------------------------------


async def test_an_alias_serves_as_the_index(server: QdrantServer, transport: str) -> None:
    by_alias = await opens_and_reads(connector(server, transport, index="a2m-test-alias"))
    assert by_alias == await opens_and_reads(connector(server, transport))


async def test_a_missing_collection_fails_open(server: QdrantServer, transport: str) -> None:
    c = connector(server, transport, index="a2m-no-such-collection")
    with pytest.raises(EngineConfigError, match="collection named by index does not exist"):
        await c.open()
    await c.close()


async def test_timeline_pages_by_order_by_and_fetch_matches_the_key(
    conn: QdrantConnector,
) -> None:
    newest = await conn.ordered(OrderedRequest(limit=7))
    assert [h.source["key"] for h in newest] == [DOCS[i]["key"] for i in range(29, 22, -1)]
    oldest = await conn.ordered(OrderedRequest(limit=40, newest_first=False))
    assert [h.source["key"] for h in oldest] == [d["key"] for d in DOCS]
    hit = await conn.fetch(Filter(must=(Condition("key", ("notes/g0/12",)),)))
    assert hit is not None
    assert hit.source == {k: v for k, v in DOCS[12].items() if k != "colour"}


async def test_a_key_prefix_of_several_words_on_a_keyword_index(conn: QdrantConnector) -> None:
    # "notes/g1/" prefilters on the words "notes" and "g1"; the key has a keyword index.
    flt = Filter(key_prefix=("key", "notes/g1/"))
    expected = {d["key"] for d in DOCS if str(d["key"]).startswith("notes/g1/")}
    got = await conn.ordered(OrderedRequest(limit=30, filter=flt))
    assert {h.source["key"] for h in got} == expected
    ranked = await conn.search(SearchRequest(limit=30, text="harbour", filter=flt))
    assert {h.source["key"] for h in ranked} == expected


# -- strict mode --------------------------------------------------------------------------------


async def test_strict_mode_refuses_a_limit_over_its_maximum(
    server: QdrantServer, transport: str
) -> None:
    c = connector(server, transport, index=STRICT)
    await c.open()
    try:
        assert len(await c.search(SearchRequest(limit=20, text="harbour"))) == 20
        with pytest.raises(EngineRejected):
            await c.search(SearchRequest(limit=21, text="harbour"))
    finally:
        await c.close()


async def test_strict_mode_refuses_a_filter_on_a_field_without_an_index(
    server: QdrantServer, transport: str
) -> None:
    c = connector(server, transport, index=STRICT)
    await c.open()
    try:
        indexed = Filter(must=(Condition("group", ("g1",)),))
        assert len(await c.ordered(OrderedRequest(limit=20, filter=indexed))) == 10
        unindexed = Filter(must=(Condition("colour", ("red",)),))
        with pytest.raises(EngineConfigError, match="without a payload index"):
            await c.ordered(OrderedRequest(limit=20, filter=unindexed))
    finally:
        await c.close()


async def gateway_call(
    store: dict[str, Any], method: str, params: dict[str, Any], times: int = 1
) -> Any:
    """The last of ``times`` calls of method through a gateway serving ``store`` as ``s``."""
    gateway = Gateway(parse_config({"stores": {"s": store}}))
    try:
        client = InProcessClient(gateway.dispatcher())
        for _ in range(times - 1):
            await client.call(method, params)
        return await client.call(method, params)
    finally:
        await gateway.close()


async def test_a_strict_mode_refusal_of_the_callers_input_is_invalid_params(
    server: QdrantServer, transport: str
) -> None:
    store = store_data(server, transport, index=STRICT)
    store["limits"] = {"max_recall_limit": 50}
    with pytest.raises(A2MRemoteError) as err:
        await gateway_call(store, "memory/recall", {"query": "harbour", "limit": 30})
    assert err.value.code == -32602
    assert err.value.data is not None
    assert err.value.data["retryable"] is False


async def test_the_servers_rate_limit_is_a_retryable_error_with_its_retry_after(
    server: QdrantServer, transport: str
) -> None:
    from qdrant_client import models

    client = admin(server)
    try:
        strict = models.StrictModeConfig(enabled=True, read_rate_limit=1)
        create(client, LIMITED, indexes=INDEXES, strict=strict)
        store = store_data(server, transport, index=LIMITED)
        with pytest.raises(A2MRemoteError) as err:
            # One read a minute: the first recall takes it, the second is refused.
            await gateway_call(store, "memory/recall", {"query": "harbour"}, times=2)
    finally:
        client.delete_collection(LIMITED)
        client.close()
    assert err.value.code == -32603
    assert err.value.data is not None
    assert err.value.data["reason"] == "engine_unavailable"
    assert err.value.data["retryable"] is True
    # The server asks for about 60 s per token; more than the deadline: asked once, not waited.
    assert err.value.data["retry_after_ms"] >= 10_000


# -- a stopped server and faults in front of a running one --------------------------------------


async def test_a_stopped_server_is_unavailable_quickly(
    server: QdrantServer, transport: str
) -> None:
    proxy = TcpProxy("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    grpc_proxy = TcpProxy("127.0.0.1", server.grpc_port)
    await proxy.start()
    await grpc_proxy.start()
    url = f"http://127.0.0.1:{proxy.port}"
    c = connector(server, transport, url=url, grpc_port=grpc_proxy.port)
    try:
        await c.open()
        assert await c.search(SearchRequest(limit=3, text="harbour"))
        await proxy.stop()
        await grpc_proxy.stop()
        started = time.monotonic()
        with pytest.raises(EngineUnavailable) as err:
            await c.search(SearchRequest(limit=3, text="harbour"))
        assert time.monotonic() - started < 5
        assert "127.0.0.1" not in str(err.value)
        assert str(proxy.port) not in str(err.value)
        assert await c.ping() is False
    finally:
        await c.close()
        await proxy.stop()
        await grpc_proxy.stop()


@pytest.mark.parametrize(
    ("fault", "asked"),
    [
        (Fault(mode="status", status=503, retry_after="1"), 3),
        (Fault(mode="status", status=429, retry_after="1"), 3),
        (Fault(mode="reset"), 3),
        (Fault(mode="drop"), 3),
    ],
    ids=["503", "429", "reset", "drop"],
)
async def test_faults_in_front_of_the_server_are_retried_then_unavailable(
    server: QdrantServer, fault: Fault, asked: int
) -> None:
    async with relay_to(server.url) as proxy:
        c = QdrantConnector(spec_of(store_data(server, "rest", url=proxy.url, retries=2)))
        await c.open()
        try:
            proxy.fault = fault
            before = proxy.requests
            with pytest.raises(EngineUnavailable) as err:
                await c.search(SearchRequest(limit=3, text="harbour"))
            assert proxy.requests - before == asked  # one try and two retries
            if fault.retry_after is not None:
                assert err.value.retry_after_ms == 1000
            proxy.fault = Fault()
            assert await c.search(SearchRequest(limit=3, text="harbour"))  # and it recovers
        finally:
            await c.close()


# -- payload indexes the mapping needs -----------------------------------------------------------


@pytest.mark.parametrize("missing", ["created_at", "key", "group"])
async def test_a_collection_missing_an_index(
    server: QdrantServer, transport: str, missing: str
) -> None:
    name = f"a2m-test-server-no-{missing.replace('_', '-')}"
    client = admin(server)
    try:
        create(client, name, indexes={f: s for f, s in INDEXES.items() if f != missing})
        c = connector(server, transport, index=name)
        if missing == "created_at":
            # order_by cannot work without it: the store is refused at open, saying which index.
            with pytest.raises(EngineConfigError, match=r"mapping\.created_at needs a datetime"):
                await c.open()
            await c.close()
            return
        info = await c.open()
        try:
            needs = {n.field: n for n in info.indexes}
            assert set(needs) == {"created_at", "key", "group"}
            assert [f for f, n in needs.items() if not n.present] == [missing]
            assert needs[missing].kinds == ("keyword",)
            assert needs[missing].without.startswith("slower")
            # Without strict mode the server still matches the field, by a payload scan.
            flt = Filter(must=(Condition(missing, (str(DOCS[4][missing]),)),))
            got = await c.ordered(OrderedRequest(limit=30, filter=flt))
            assert "notes/g1/4" in {h.source["key"] for h in got}
        finally:
            await c.close()
    finally:
        client.delete_collection(name)
        client.close()


def test_check_lists_the_indexes_and_what_is_missing(server: QdrantServer, tmp_path: Path) -> None:
    store = store_data(server, "rest")
    store["scope"] = {"filters": [{"field": "colour", "claims": ["groups"]}]}
    # The check process imports qdrant-client inside its first deadline: room for a busy machine.
    store["request_timeout_ms"] = 60_000
    path = tmp_path / "config.yaml"
    # A scoped store needs server.auth (check refuses what serve refuses); any key will do.
    auth = {"api_keys": [{"subject": "ci", "hash": "sha256:" + "0" * 64}]}
    path.write_text(yaml.safe_dump({"server": {"auth": auth}, "stores": {"s": store}}))
    proc = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    indexes = {i["field"]: i for i in report["indexes"]}
    assert {f for f, i in indexes.items() if i["present"]} == {"created_at", "key", "group"}
    assert indexes["colour"]["present"] is False
    assert indexes["colour"]["purpose"].startswith("scope.filters")
    assert "strict mode refuses" in indexes["colour"]["without"]
    assert "without" not in indexes["key"]
    assert server.api_key not in proc.stdout + proc.stderr


# -- the store's breaker and Retry-After on the wire -------------------------------------------


async def test_the_breaker_opens_on_a_dead_server_and_a_probe_closes_it(
    server: QdrantServer,
) -> None:
    from gateway.resilience import BreakerState, EngineGuard
    from tests.support.resilience import FakeClock, state

    async with relay_to(server.url) as proxy:
        data = store_data(server, "rest", url=proxy.url, retries=0)
        data["resilience"] = {"breaker": {"failure_threshold": 3, "open_ms": 250, "hold_ms": 0}}
        cfg = parse_config({"stores": {"s": data}})
        gateway = Gateway(cfg)
        clock = FakeClock()
        guard = EngineGuard("s", cfg.stores["s"].resilience, 8, clock=clock)
        gateway.stores["s"].guard = guard
        client = InProcessClient(gateway.dispatcher())
        query = {"query": "harbour tides"}
        try:
            assert (await client.call("memory/recall", query))["records"]
            proxy.fault = Fault("reset")  # the server dies
            for _ in range(3):
                with pytest.raises(A2MRemoteError) as info:
                    await client.call("memory/recall", query)
                assert info.value.data["reason"] == "engine_unavailable"
            assert state(guard) is BreakerState.OPEN
            before = proxy.requests
            with pytest.raises(A2MRemoteError) as info:
                await client.call("memory/recall", query)
            assert info.value.data == {
                "reason": "circuit_open",
                "retryable": True,
                "retry_after_ms": 250,
            }
            assert proxy.requests == before  # refused without asking the server
            proxy.fault = Fault()  # back again
            clock.now += 0.25
            assert (await client.call("memory/recall", query))["records"]  # the probe
            assert state(guard) is BreakerState.CLOSED
            assert proxy.requests > before
        finally:
            await gateway.close()


async def test_a_503_with_retry_after_reaches_the_caller_as_retry_after_ms(
    server: QdrantServer,
) -> None:
    async with relay_to(server.url) as proxy:
        data = store_data(server, "rest", url=proxy.url, retries=0)
        gateway = Gateway(parse_config({"stores": {"s": data}}))
        client = InProcessClient(gateway.dispatcher())
        try:
            assert (await client.call("memory/recall", {"query": "harbour"}))["records"]
            proxy.fault = Fault(mode="status", status=503, retry_after="2")
            with pytest.raises(A2MRemoteError) as info:
                await client.call("memory/recall", {"query": "harbour"})
            assert info.value.code == -32603
            assert info.value.data == {
                "reason": "engine_unavailable",
                "retryable": True,
                "retry_after_ms": 2000,
            }
        finally:
            await gateway.close()
