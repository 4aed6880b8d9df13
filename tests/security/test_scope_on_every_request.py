"""Every engine request made on a caller's behalf carries the caller's scope.

A recording proxy sits between the gateway and the real Elasticsearch and
OpenSearch nodes. For scoped recall (lexical, dense, hybrid, empty query,
key_prefix, where, owner, prompt, collapse), timeline (search_after pages and
PIT pages) and fetch, every request the connector sends must be either a
``_search`` whose every constraint position (the query's ``bool.filter``, the
kNN clause's filter) holds the scope clause, an ``_msearch`` (hybrid) each of
whose searches does, on the store's index only, or point-in-time bookkeeping
that reads no document. On Qdrant the client itself is wrapped: every query, scroll
and retrieve must carry the scope condition in its filter and in every prefetch.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from connectors.lucene.connector import LuceneConnector
from connectors.lucene.spec import LuceneConnectionSpec
from gateway.runtime import Gateway
from gateway.store.connector_spec import connector_spec
from tests.security.acl_corpus import (
    ALPHA,
    QUERY_VECTOR,
    ROUTING_INDEX,
    acl_subset,
    collision_store,
    load_collisions,
    load_index,
    load_qdrant_acl,
    lucene_store,
    qdrant_store,
)
from tests.security.support import Issuer, asgi_client, auth_section, bearer, build_gateway, rpc
from tests.support.recording_proxy import Recorded, recording_proxy
from tests.support.scifact import SciFact, load_scifact

pytestmark = pytest.mark.integration

ENGINES = [
    pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
    pytest.param("opensearch", marks=pytest.mark.opensearch),
]


@pytest.fixture(scope="module")
def sf(scifact_dir: Path) -> SciFact:
    return load_scifact(scifact_dir)


def constraint_lists(body: Any) -> list[list[Any]]:
    """The filter lists of every place a search body selects documents."""
    if not isinstance(body, dict):
        return []
    out: list[list[Any]] = []
    if "knn" in body:  # Elasticsearch's top-level kNN clause
        out.append(list(body["knn"].get("filter") or []))
    query = body.get("query")
    if isinstance(query, dict):
        if "knn" in query:  # OpenSearch's knn query
            for spec in query["knn"].values():
                out.append(list(spec.get("filter", {}).get("bool", {}).get("filter") or []))
        else:
            out.append(list(query.get("bool", {}).get("filter") or []))
    return out


def carries(body: Any, clause: dict[str, Any]) -> bool:
    lists = constraint_lists(body)
    return bool(lists) and all(clause in clauses for clauses in lists)


def is_pit_bookkeeping(r: Recorded) -> bool:
    path = r.path.split("?")[0]
    return path.endswith("/_pit") or "point_in_time" in path or path == "/_pit"


def msearch_bodies(r: Recorded) -> list[Any]:
    """The search bodies of an ``_msearch``, asserting each header reads the path's index.

    A header naming an index (or any other option) could send one search elsewhere
    than the store's index: the connector's headers are empty.
    """
    lines = r.body
    assert isinstance(lines, list), r
    assert lines, r
    assert len(lines) % 2 == 0, r
    headers, bodies = lines[0::2], lines[1::2]
    assert all(h == {} for h in headers), f"an _msearch header that is not empty: {r}"
    assert r.path.split("?")[0].split("/")[1] != "_msearch", f"an _msearch on no index: {r}"
    return list(bodies)


def check_requests(seen: list[Recorded], clause: dict[str, Any]) -> int:
    """Assert every request is a scoped search (every search of an ``_msearch``
    included) or PIT bookkeeping; the number of searches."""
    searches = 0
    for r in seen:
        if is_pit_bookkeeping(r):
            assert r.body is None or "query" not in r.body, r
            continue
        path = r.path.split("?")[0]
        if path.endswith("/_msearch"):
            for body in msearch_bodies(r):
                assert carries(body, clause), f"an _msearch search without the scope: {r}"
                searches += 1
            continue
        assert path.endswith("/_search"), f"an engine request that is not a search: {r}"
        assert carries(r.body, clause), f"a search without the caller's scope: {r}"
        searches += 1
    return searches


def test_the_check_sees_a_missing_scope() -> None:
    clause = {"term": {"acl": {"value": ALPHA}}}
    assert not carries({"query": {"ids": {"values": ["r1"]}}}, clause)
    assert not carries({"size": 3}, clause)
    unscoped_knn = {"knn": {"field": "v", "filter": []}, "query": {"bool": {"filter": [clause]}}}
    assert not carries(unscoped_knn, clause)
    assert carries({"query": {"bool": {"filter": [clause], "must": [{"match_all": {}}]}}}, clause)


def test_the_check_sees_an_msearch_leg_without_the_scope() -> None:
    clause = {"term": {"acl": {"value": ALPHA}}}
    scoped = {"query": {"bool": {"filter": [clause], "must": [{"match": {"text": "x"}}]}}}
    knn = {"query": {"knn": {"v": {"vector": [1.0], "k": 5, "filter": {"bool": {"filter": []}}}}}}
    both = Recorded("POST", "/idx/_msearch", [{}, scoped, {}, scoped])
    assert check_requests([both], clause) == 2
    # One leg (the kNN one here) without the scope fails the check, as does a header
    # that reads another index, or an _msearch on no index at all.
    for bad in (
        Recorded("POST", "/idx/_msearch", [{}, scoped, {}, knn]),
        Recorded("POST", "/idx/_msearch", [{}, scoped, {"index": "other"}, scoped]),
        Recorded("POST", "/_msearch", [{}, scoped, {}, scoped]),
    ):
        with pytest.raises(AssertionError):
            check_requests([bad], clause)


async def _gateway_through(
    store: dict[str, Any], issuer: Issuer, engine: str, page_size: int
) -> Gateway:
    gateway = build_gateway({"auth": auth_section(issuer)}, {"s": store}, {})
    # A small page so timelines take several search_after / PIT pages.
    gateway.stores["s"].connector = LuceneConnector(
        connector_spec(gateway.config.stores["s"]).of(LuceneConnectionSpec), page_size=page_size
    )
    await gateway.start()
    return gateway


async def _run(
    gateway: Gateway,
    seen: list[Recorded],
    token: dict[str, str],
    calls: list[tuple[str, dict[str, Any]]],
    clause: dict[str, Any],
) -> None:
    async with asgi_client(gateway) as client:
        for method, params in calls:
            seen.clear()
            r = await client.post(
                "/a2m/s",
                content=json.dumps(rpc(method, params)),
                headers={"content-type": "application/json", **token},
            )
            answer = r.json()
            assert "error" not in answer, (method, params, answer)
            records = answer["result"].get("records", [answer["result"].get("record")])
            assert any(records), (method, params)  # the call really read documents
            assert check_requests(seen, clause) >= 1, (method, params, seen)


@pytest.fixture(scope="module", params=ENGINES)
def lucene_engine(request: pytest.FixtureRequest, sf: SciFact) -> tuple[str, str, str]:
    engine: str = request.param
    url: str = request.getfixturevalue(f"{engine}_url")
    _, doc_ids = acl_subset(sf)
    index = load_index(engine, url, sf, doc_ids)  # type: ignore[arg-type]
    load_collisions(engine, url)  # type: ignore[arg-type]
    return engine, url, index


def acl_calls(sf: SciFact) -> list[tuple[str, dict[str, Any]]]:
    qids, _ = acl_subset(sf)
    vector = sf.query_vector(qids[0])
    text = sf.queries[qids[0]]
    title = sf.titles[_first_alpha(sf)]
    return [
        ("memory/recall", {"query": text}),
        ("memory/recall", {"embedding": vector}),
        ("memory/recall", {"query": text, "embedding": vector}),
        ("memory/recall", {}),
        ("memory/recall", {"limit": 20, "key_prefix": "scifact/"}),
        ("memory/recall", {"query": text, "key_prefix": "scifact/"}),
        ("memory/recall", {"query": text, "embedding": vector, "key_prefix": "scifact/"}),
        ("memory/recall", {"query": title, "where": {"title": title}}),
        ("memory/recall", {"embedding": vector, "where": {"owner": "alice"}}),
        ("memory/recall", {"query": text, "owner": "alice"}),
        ("memory/recall", {"query": text, "embedding": vector, "prompt": True}),
        ("memory/timeline", {"limit": 30}),
        ("memory/timeline", {"limit": 30, "key_prefix": "scifact/", "owner": "alice"}),
        ("memory/fetch", {"key": f"scifact/{_first_alpha(sf)}"}),
    ]


def _first_alpha(sf: SciFact) -> str:
    from tests.security.acl_corpus import visible

    _, doc_ids = acl_subset(sf)
    return next(d for d in doc_ids if visible([ALPHA], d))


@pytest.mark.parametrize("collapse", [False, True])
async def test_every_lucene_request_carries_the_scope(
    lucene_engine: tuple[str, str, str], sf: SciFact, issuer: Issuer, collapse: bool
) -> None:
    engine, url, index = lucene_engine
    clause = {"term": {"acl": {"value": ALPHA}}}
    with recording_proxy(url) as (proxy_url, seen):
        store = lucene_store(engine, proxy_url, index)
        store["search"]["collapse_group"] = collapse
        gateway = await _gateway_through(store, issuer, engine, page_size=7)
        try:
            alice = bearer(issuer.token("alice", groups=[ALPHA]))
            await _run(gateway, seen, alice, acl_calls(sf), clause)
        finally:
            await gateway.close()


async def test_pit_pages_and_the_hybrid_re_read_carry_the_scope(
    lucene_engine: tuple[str, str, str], issuer: Issuer
) -> None:
    engine, url, _ = lucene_engine
    clause = {"term": {"tenant": {"value": "A"}}}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory/timeline", {"limit": 5}),  # engine ids: PIT pages, one document each
        ("memory/recall", {}),
        ("memory/recall", {"query": "alpha quarterly", "embedding": QUERY_VECTOR}),
        ("memory/recall", {"query": "alpha", "embedding": QUERY_VECTOR, "where": {"key": "k/r1"}}),
        ("memory/fetch", {"key": "k/r1"}),
    ]
    with recording_proxy(url) as (proxy_url, seen):
        store = collision_store(engine, proxy_url, ROUTING_INDEX)
        gateway = await _gateway_through(store, issuer, engine, page_size=1)
        try:
            tenant_a = bearer(issuer.token("alice", tenant=["A"]))
            await _run(gateway, seen, tenant_a, calls, clause)
            seen.clear()
            await _run(gateway, seen, tenant_a, calls[:1], clause)
        finally:
            await gateway.close()


# -- Qdrant ----------------------------------------------------------------------------------------

_READS = frozenset({"query_points", "query_batch_points", "scroll"})
_BOOKKEEPING = frozenset({"get_collection", "ping", "close"})


class RecordingQdrant:
    """Wraps the connector's engine and records each read's name and request."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name in ("errors", "is_transient", "retry_after_s"):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args[0] if args else None))
            return await attr(*args, **kwargs)

        return call


def _qdrant_scoped(request: Any, groups: list[str]) -> bool:
    """The request's payload filter requires an acl value among the caller's groups. The
    filter of a ranked request also applies to each of its prefetches (both engines' model
    builders put it there)."""
    from connectors.qdrant.query import AllOf, Match, MatchAnyOf

    flt = getattr(request, "qfilter", None)
    if not isinstance(flt, AllOf):
        return False
    for cond in flt.conditions:
        if isinstance(cond, Match) and cond.field == "acl" and cond.value in groups:
            return True
        if isinstance(cond, MatchAnyOf) and cond.field == "acl" and set(cond.values) <= set(groups):
            return True
    return False


def check_qdrant_calls(calls: list[tuple[str, Any]], groups: list[str]) -> int:
    reads = 0
    for name, request in calls:
        if name in _BOOKKEEPING:
            continue
        assert name in _READS, f"an unexpected qdrant call: {name}"
        if name == "query_batch_points":
            # One call, several searches (hybrid legs fused by the gateway): each is checked.
            assert request, "an empty batch"
            for req in request:
                assert _qdrant_scoped(req, groups), f"a batched search without scope: {req}"
            reads += len(request)
            continue
        assert _qdrant_scoped(request, groups), f"{name} without the caller's scope: {request}"
        reads += 1
    return reads


async def test_every_qdrant_read_carries_the_scope(
    sf: SciFact, issuer: Issuer, tmp_path: Path
) -> None:
    qids, doc_ids = acl_subset(sf)
    await asyncio.to_thread(load_qdrant_acl, tmp_path, sf, doc_ids)
    gateway = build_gateway({"auth": auth_section(issuer)}, {"s": qdrant_store(tmp_path)}, {})
    await gateway.start()
    connector: Any = gateway.stores["s"].connector
    recorder = RecordingQdrant(connector._client)
    connector._client = recorder
    vector, text = sf.query_vector(qids[0]), sf.queries[qids[0]]
    calls: list[tuple[str, Any]] = [
        ("memory/recall", {"query": text}),
        ("memory/recall", {"embedding": vector}),
        ("memory/recall", {"query": text, "embedding": vector}),
        ("memory/recall", {}),
        ("memory/recall", {"query": text, "key_prefix": "scifact/1"}),
        ("memory/recall", {"query": text, "embedding": vector, "key_prefix": "scifact/"}),
        ("memory/recall", {"embedding": vector, "where": {"owner": "alice"}}),
        ("memory/recall", {"query": text, "owner": "alice", "prompt": True}),
        ("memory/timeline", {"limit": 30}),
        ("memory/timeline", {"limit": 30, "key_prefix": "scifact/"}),
        ("memory/fetch", {"key": f"scifact/{_first_alpha(sf)}"}),
    ]
    alice = bearer(issuer.token("alice", groups=[ALPHA]))
    try:
        async with asgi_client(gateway) as client:
            for method, params in calls:
                recorder.calls.clear()
                r = await client.post(
                    "/a2m/s",
                    content=json.dumps(rpc(method, params)),
                    headers={"content-type": "application/json", **alice},
                )
                answer = r.json()
                assert "error" not in answer, (method, params, answer)
                records = answer["result"].get("records", [answer["result"].get("record")])
                assert any(records), (method, params)
                assert check_qdrant_calls(recorder.calls, [ALPHA]) >= 1, (method, params)
    finally:
        await gateway.close()


def test_the_qdrant_check_sees_a_missing_scope() -> None:
    from connectors.qdrant.engine import Nearest, Ranked, Scroll
    from connectors.qdrant.query import AllOf, HasIds, Match

    bare = Ranked(Nearest([1.0], None), AllOf((HasIds((1,)),)), 10, False, False)
    with pytest.raises(AssertionError):
        check_qdrant_calls([("query_points", bare)], [ALPHA])
    with pytest.raises(AssertionError):
        check_qdrant_calls([("scroll", Scroll(None, 10, False, False))], [ALPHA])
    scoped = Scroll(AllOf((Match("acl", ALPHA),)), 10, False, False)
    assert check_qdrant_calls([("scroll", scoped)], [ALPHA]) == 1  # control
