"""Scoped stores on real engines: principal A never sees a document visible only to B.

SciFact (judged documents of 100 train queries plus 400 others) is loaded into
Elasticsearch, OpenSearch and Qdrant with an ACL and an owner per document
(:mod:`tests.security.acl_corpus`). Each engine is served by the real gateway
through its HTTP app, with real credentials: alice is an RS256 JWT carrying
``groups: [ALPHA]``, bob an API key whose claims say ``groups: [BRAVO]``.

For each engine, 1,000 seeded random calls by alice (recall by text, by vector,
hybrid and by recency; timeline; fetch; with and without ``where``,
``key_prefix`` and ``owner``) must return only documents whose ACL names
ALPHA. Many calls are aimed at bob's documents on purpose: their exact titles,
their vectors, their keys and ids. A control shows the same probes do find
those documents for bob, so it is the scope that keeps them from alice.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.runtime import Gateway
from tests.conftest import QdrantServer
from tests.security.acl_corpus import (
    ALIAS,
    ALPHA,
    BRAVO,
    NOBODY,
    QDRANT_COLLISIONS,
    QDRANT_COLLISIONS_ALIAS,
    QUERY_VECTOR,
    ROUTING_INDEX,
    SECRET,
    acl_of,
    acl_subset,
    collision_store,
    load_collisions,
    load_index,
    load_qdrant_acl,
    load_qdrant_collisions,
    lucene_store,
    owner_of,
    qdrant_collision_store,
    qdrant_store,
    server_client_args,
    visible,
)
from tests.security.support import (
    BOB_KEY,
    Issuer,
    asgi_client,
    auth_section,
    bearer,
    build_gateway,
    rpc,
)
from tests.support import lucene_loader
from tests.support.scifact import SciFact, load_scifact

pytestmark = pytest.mark.integration

QUERIES = 1000
CONCURRENCY = 8


@dataclass
class Corpus:
    sf: SciFact
    query_ids: list[str]
    doc_ids: list[str]

    @property
    def b_only(self) -> list[str]:
        return [d for d in self.doc_ids if visible([BRAVO], d) and not visible([ALPHA], d)]


@pytest.fixture(scope="module")
def corpus(scifact_dir: Path) -> Corpus:
    sf = load_scifact(scifact_dir)
    qids, dids = acl_subset(sf)
    return Corpus(sf, qids, dids)


@dataclass
class Target:
    engine: str
    gateway: Gateway
    client: httpx.AsyncClient
    group_of: Callable[[str], str]
    stats: Counter[str] = field(default_factory=Counter)

    async def call(self, headers: dict[str, str], method: str, params: dict[str, Any]) -> Any:
        r = await self.client.post(
            "/a2m/scifact",
            content=json.dumps(rpc(method, params)),
            headers={"content-type": "application/json", **headers},
        )
        assert r.status_code == 200, r.text[:300]
        return r.json()


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
        pytest.param("opensearch", marks=pytest.mark.opensearch),
        "qdrant",
        pytest.param("qdrant-server", marks=pytest.mark.integration),
    ],
)
async def target(
    request: pytest.FixtureRequest,
    corpus: Corpus,
    issuer: Issuer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Target]:
    engine: str = request.param
    group_of: Callable[[str], str]
    if engine.startswith("qdrant"):
        path = tmp_path_factory.mktemp("qdrant-acl")
        server: QdrantServer | None = None
        if engine == "qdrant-server":
            server = request.getfixturevalue("qdrant_server")
            await asyncio.to_thread(
                load_qdrant_acl, path, corpus.sf, corpus.doc_ids, server_client_args(server)
            )
        else:
            load_qdrant_acl(path, corpus.sf, corpus.doc_ids)
        store = qdrant_store(path, server)

        def group_of(doc_id: str) -> str:
            return f"g{int(doc_id) % 7}"

    else:
        url: str = request.getfixturevalue(f"{engine}_url")
        index = await asyncio.to_thread(
            load_index,
            engine,  # type: ignore[arg-type]
            url,
            corpus.sf,
            corpus.doc_ids,
        )
        store = lucene_store(engine, url, index)
        group_of = lucene_loader.group_of
    gateway = build_gateway({"auth": auth_section(issuer, [BRAVO])}, {"scifact": store}, {})
    await gateway.start()
    client = asgi_client(gateway)
    yield Target(engine, gateway, client, group_of)
    await client.aclose()
    await gateway.close()


# -- random calls ----------------------------------------------------------------------------------


def random_call(rng: random.Random, corpus: Corpus, t: Target) -> tuple[str, dict[str, Any], str]:
    """A call alice might make, often aimed at bob's documents; and what kind it is."""
    sf = corpus.sf
    target_doc = rng.choice(corpus.b_only if rng.random() < 0.6 else corpus.doc_ids)
    params: dict[str, Any] = {"limit": rng.randint(1, 50)}
    roll = rng.random()
    if roll < 0.25:
        kind = "recall-text"
        choice = rng.random()
        if choice < 0.4:
            params["query"] = sf.titles[target_doc]  # the exact title of a document of bob's
        elif choice < 0.8:
            params["query"] = sf.queries[rng.choice(corpus.query_ids)]
        else:
            words = sf.texts[rng.choice(corpus.doc_ids)].split()
            params["query"] = " ".join(rng.sample(words, min(len(words), rng.randint(1, 6))))
    elif roll < 0.40:
        kind = "recall-vector"
        params["embedding"] = sf.doc_vector(target_doc)  # bob's document is its own nearest
    elif roll < 0.50:
        kind = "recall-hybrid"
        params["query"] = sf.titles[target_doc]
        params["embedding"] = sf.query_vector(rng.choice(corpus.query_ids))
    elif roll < 0.60:
        kind = "recall-recent"
    elif roll < 0.80:
        kind = "timeline"
    else:
        kind = "fetch"
        params = {"key": f"scifact/{target_doc}"}
    if kind != "fetch":
        r = rng.random()
        if r < 0.15:
            params["where"] = {"group": t.group_of(target_doc)}
        elif r < 0.25:
            params["where"] = {"id": target_doc}
        elif r < 0.35:
            params["where"] = {
                "key": [f"scifact/{target_doc}", f"scifact/{rng.choice(corpus.doc_ids)}"]
            }
        elif r < 0.45:
            params["key_prefix"] = f"scifact/{target_doc[: rng.randint(1, len(target_doc))]}"
    if rng.random() < 0.1:
        params["owner"] = "alice"
    method = {"fetch": "memory/fetch", "timeline": "memory/timeline"}.get(kind, "memory/recall")
    return method, params, kind


def returned_ids(answer: dict[str, Any]) -> list[str]:
    result = answer["result"]
    if "record" in result:
        return [] if result["record"] is None else [result["record"]["id"]]
    return [r["id"] for r in result["records"]]


async def test_principal_a_never_sees_a_document_only_b_may_see(
    target: Target, corpus: Corpus, issuer: Issuer
) -> None:
    rng = random.Random(f"scoped-{target.engine}")
    alice = bearer(issuer.token("alice", groups=[ALPHA], exp_in=3600))
    calls = [random_call(rng, corpus, target) for _ in range(QUERIES)]
    sem = asyncio.Semaphore(CONCURRENCY)
    leaks: list[tuple[str, str, dict[str, Any]]] = []
    returned = Counter[str]()

    async def one(method: str, params: dict[str, Any], kind: str) -> None:
        async with sem:
            answer = await target.call(alice, method, params)
        assert "error" not in answer, (method, params, answer["error"])
        raw = json.dumps(answer)
        for value in (ALPHA, BRAVO, NOBODY, '"acl"'):
            assert value not in raw, f"the ACL field left the gateway ({method})"
        ids = returned_ids(answer)
        returned[kind] += len(ids)
        target.stats["non-empty"] += bool(ids)
        for doc_id in ids:
            if not visible([ALPHA], doc_id):
                leaks.append((doc_id, method, params))
            if params.get("owner") == "alice":
                assert owner_of(doc_id) == "alice"

    await asyncio.gather(*(one(*c) for c in calls))
    assert leaks == [], f"{len(leaks)} documents alice may not see: {leaks[:3]}"
    # The test is only as good as what it exercised: most calls returned documents, and
    # every kind of call did.
    assert target.stats["non-empty"] > QUERIES // 2, target.stats
    for kind in ("recall-text", "recall-vector", "recall-hybrid", "recall-recent", "timeline"):
        assert returned[kind] > 0, kind
    print(f"\n{target.engine}: {QUERIES} calls by alice, {sum(returned.values())} records, 0 leaks")


async def test_the_same_probes_find_bobs_documents_for_bob(
    target: Target, corpus: Corpus, issuer: Issuer
) -> None:
    alice = bearer(issuer.token("alice", groups=[ALPHA]))
    bob = bearer(BOB_KEY)
    probes = corpus.b_only[:40]
    found_by_bob = 0
    for doc_id in probes:
        key = {"key": f"scifact/{doc_id}"}
        by_bob = await target.call(bob, "memory/fetch", key)
        assert returned_ids(by_bob) == [doc_id]
        assert returned_ids(await target.call(alice, "memory/fetch", key)) == []
        vector = {"embedding": corpus.sf.doc_vector(doc_id), "limit": 3}
        found_by_bob += doc_id in returned_ids(await target.call(bob, "memory/recall", vector))
        assert doc_id not in returned_ids(await target.call(alice, "memory/recall", vector))
        where = {"where": {"id": doc_id}}
        assert returned_ids(await target.call(bob, "memory/timeline", where)) == [doc_id]
        assert returned_ids(await target.call(alice, "memory/timeline", where)) == []
    assert found_by_bob >= len(probes) * 0.9  # kNN is approximate on the Lucene engines


async def test_owner_on_a_real_engine(target: Target, corpus: Corpus, issuer: Issuer) -> None:
    alice = bearer(issuer.token("alice", groups=[ALPHA, BRAVO]))
    denied = await target.call(alice, "memory/timeline", {"owner": "bob"})
    assert denied["error"]["code"] == -32005
    mine = await target.call(alice, "memory/timeline", {"owner": "alice", "limit": 100})
    ids = returned_ids(mine)
    assert ids
    assert all(owner_of(d) == "alice" for d in ids)
    d = (await target.call(alice, "memory/describe", {}))["result"]
    assert "scopes" in d["capabilities"]
    # A principal in no group sees nothing, and its calls never reach the engine.
    nobody = bearer(issuer.token("dave"))
    assert returned_ids(await target.call(nobody, "memory/timeline", {"limit": 100})) == []


def test_acl_assignment_covers_every_case(corpus: Corpus) -> None:
    kinds = Counter(tuple(acl_of(d)) for d in corpus.doc_ids)
    assert set(kinds) == {(ALPHA, BRAVO), (ALPHA,), (BRAVO,), (NOBODY,)}
    assert len(corpus.b_only) > 100


@pytest.mark.elasticsearch
async def test_a_text_only_acl_field_never_matches_by_phrase(
    elasticsearch_url: str, issuer: Issuer
) -> None:
    from elasticsearch import AsyncElasticsearch

    index = "a2m-test-acl-text"
    es = AsyncElasticsearch(elasticsearch_url, request_timeout=30)
    try:
        if await es.indices.exists(index=index):
            await es.indices.delete(index=index)
        await es.indices.create(
            index=index,
            mappings={"properties": {"body": {"type": "text"}, "acl": {"type": "text"}}},
        )
        await es.index(index=index, id="1", document={"body": "plan", "acl": "team-a"})
        await es.index(index=index, id="2", document={"body": "plan", "acl": "team-a-admins"})
        await es.indices.refresh(index=index)
    finally:
        await es.close()
    store = {
        "backend": "elasticsearch",
        "index": index,
        "connection": {"hosts": [elasticsearch_url]},
        "mapping": {"content": "body"},
        "search": {"text_fields": ["body"]},
        "scope": {"filters": [{"field": "acl", "claims": ["groups"]}]},
    }
    gateway = build_gateway({"auth": auth_section(issuer)}, {"scifact": store}, {})
    async with asgi_client(gateway) as client:
        t = Target("elasticsearch", gateway, client, str)
        answer = await t.call(bearer(issuer.token(groups=["team-a"])), "memory/timeline", {})
    await gateway.close()
    # Refusing to serve the store is as good as matching exactly; a phrase match is a leak.
    assert "error" in answer or returned_ids(answer) == ["1"], answer


# -- colliding ids: routing and aliases --------------------------------------------------

COLLISION_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("memory/recall", {"query": "alpha quarterly"}),
    ("memory/recall", {"embedding": QUERY_VECTOR}),
    ("memory/recall", {"query": "alpha quarterly", "embedding": QUERY_VECTOR}),
    ("memory/recall", {"query": "alpha quarterly", "embedding": QUERY_VECTOR, "limit": 1}),
    ("memory/recall", {}),
    ("memory/recall", {"query": "alpha", "embedding": QUERY_VECTOR, "key_prefix": "k/r"}),
    ("memory/recall", {"query": "alpha", "embedding": QUERY_VECTOR, "where": {"key": "k/r1"}}),
    ("memory/timeline", {}),
    ("memory/fetch", {"key": "k/r1"}),
    ("memory/fetch", {"key": "k/r2"}),
]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
        pytest.param("opensearch", marks=pytest.mark.opensearch),
    ],
)
async def collisions(request: pytest.FixtureRequest) -> tuple[str, str]:
    engine: str = request.param
    url: str = request.getfixturevalue(f"{engine}_url")
    await asyncio.to_thread(load_collisions, engine, url)  # type: ignore[arg-type]
    return engine, url


@pytest.mark.parametrize("index", [ROUTING_INDEX, ALIAS])
@pytest.mark.parametrize(
    "candidates",
    [pytest.param(100, id="legs-of-ids-then-re-read"), pytest.param(1, id="legs-with-documents")],
)
async def test_colliding_ids_never_answer_another_tenants_copy(
    collisions: tuple[str, str], index: str, candidates: int, issuer: Issuer
) -> None:
    engine, url = collisions
    store = collision_store(engine, url, index)
    # Hybrid legs deeper than 2 x limit return ids and the page is re-read; shallower
    # legs carry their documents: both shapes must keep tenant A's copy.
    store["search"]["candidates"] = candidates
    gateway = build_gateway({"auth": auth_section(issuer)}, {"scifact": store}, {})
    await gateway.start()
    tenant_a = bearer(issuer.token("alice", tenant=["A"]))
    tenant_b = bearer(issuer.token("bea", tenant=["B"]))
    try:
        async with asgi_client(gateway) as client:
            t = Target(engine, gateway, client, str)
            for method, params in COLLISION_CALLS:
                answer = await t.call(tenant_a, method, params)
                assert "error" not in answer, (method, params, answer)
                raw = json.dumps(answer)
                assert SECRET not in raw, f"tenant B's copy answered {method} {params}"
                if index == ALIAS and params.get("key") == "k/r2":
                    assert answer["result"]["record"] is None  # the alias holds no r2
                    continue
                assert "tenant A" in raw, (method, params, answer)  # A's copy, not nothing
            # Control: the same calls do reach B's copies for B.
            b_hybrid = await t.call(tenant_b, *COLLISION_CALLS[2])
            assert SECRET in json.dumps(b_hybrid)
            assert "tenant A" not in json.dumps(b_hybrid)
    finally:
        await gateway.close()


@pytest.fixture(
    params=[
        pytest.param(("local", QDRANT_COLLISIONS), id="local"),
        pytest.param(("rest", QDRANT_COLLISIONS), id="server-rest", marks=pytest.mark.integration),
        pytest.param(
            ("rest", QDRANT_COLLISIONS_ALIAS), id="server-rest-alias", marks=pytest.mark.integration
        ),
        pytest.param(
            ("grpc", QDRANT_COLLISIONS_ALIAS), id="server-grpc-alias", marks=pytest.mark.integration
        ),
    ],
)
async def qdrant_collision_target(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The colliding points in local mode, or on the server read over REST or gRPC through
    the collection's name or its alias: the store's config."""
    protocol, index = request.param
    if protocol == "local":
        await asyncio.to_thread(load_qdrant_collisions, tmp_path)
        return qdrant_collision_store(tmp_path)
    server: QdrantServer = request.getfixturevalue("qdrant_server")
    await asyncio.to_thread(load_qdrant_collisions, tmp_path, server_client_args(server))
    return qdrant_collision_store(tmp_path, server, grpc=protocol == "grpc", index=index)


async def test_qdrant_colliding_ids_and_keys_never_answer_another_tenants_point(
    issuer: Issuer, qdrant_collision_target: dict[str, Any]
) -> None:
    store = qdrant_collision_target
    gateway = build_gateway({"auth": auth_section(issuer)}, {"scifact": store}, {})
    await gateway.start()
    tenant_a = bearer(issuer.token("alice", tenant=["A"]))
    tenant_b = bearer(issuer.token("bea", tenant=["B"]))
    try:
        async with asgi_client(gateway) as client:
            t = Target("qdrant", gateway, client, str)
            for method, params in COLLISION_CALLS:
                if params.get("key") == "k/r2":
                    continue  # no r2 here
                answer = await t.call(tenant_a, method, params)
                assert "error" not in answer, (method, params, answer)
                raw = json.dumps(answer)
                assert SECRET not in raw, f"tenant B's point answered {method} {params}"
                assert "tenant A" in raw, (method, params, answer)
            b_fetch = await t.call(tenant_b, "memory/fetch", {"key": "k/r1"})
            assert SECRET in json.dumps(b_fetch)  # the key really is shared
    finally:
        await gateway.close()
