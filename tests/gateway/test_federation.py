"""Federation on the three real engines: the scoped SciFact corpus split across them.

The ACL corpus of :mod:`tests.security.acl_corpus` is split into three disjoint
shards by a hash of the id: one in Elasticsearch, one in OpenSearch (reached
through a TCP proxy the tests stop, stall and restart, never the shared node
itself) and one in Qdrant in process (qdrant-edge). Federation ``all`` spans the three, each
member keeping its own scope filter; ``solo`` spans only the proxied member.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import statistics
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from gateway.config import parse_config
from gateway.federation.federation import decode_id, encode_id
from gateway.runtime import Gateway
from tests.conftest import QdrantServer
from tests.security.acl_corpus import (
    ALPHA,
    BRAVO,
    acl_subset,
    load_index,
    load_qdrant_acl,
    lucene_store,
    qdrant_store,
    server_client_args,
    visible,
)
from tests.security.support import BOB_KEY, Issuer, asgi_client, auth_section, bearer, rpc
from tests.support.scifact import SciFact, load_scifact
from tests.support.tcp_proxy import TcpProxy
from tests.support.wire import assert_response

QD_COLLECTION = "a2m-test-fed-qd"
"""The Qdrant member's collection on the server, read over gRPC."""

pytestmark = [pytest.mark.integration, pytest.mark.elasticsearch, pytest.mark.opensearch]

MEMBERS = ("es", "os", "qd")
WEIGHTS = {"es": 1.2, "os": 1.0, "qd": 1.0}
RRF_K = 60


def shard_of(doc_id: str) -> str:
    return MEMBERS[zlib.crc32(f"fed/{doc_id}".encode()) % 3]


@dataclass
class Fed:
    sf: SciFact
    query_ids: list[str]
    doc_ids: list[str]
    gateway: Gateway
    client: httpx.AsyncClient
    proxy: TcpProxy

    async def call(
        self, headers: dict[str, str], method: str, params: dict[str, Any], store: str = "all"
    ) -> Any:
        r = await self.client.post(
            f"/a2m/{store}",
            content=json.dumps(rpc(method, params)),
            headers={"content-type": "application/json", **headers},
        )
        assert r.status_code == 200, r.text[:300]
        # A federation is a store to its clients: its answers keep A2M's wire shape too.
        assert_response(r.json(), method, context=f"federation {store}")
        return r.json()

    async def result(
        self, headers: dict[str, str], method: str, params: dict[str, Any], store: str = "all"
    ) -> Any:
        answer = await self.call(headers, method, params, store)
        assert "error" not in answer, answer["error"]
        return answer["result"]

    @property
    def b_only(self) -> list[str]:
        return [d for d in self.doc_ids if visible([BRAVO], d) and not visible([ALPHA], d)]


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Issuer:
    return Issuer.create(tmp_path_factory.mktemp("idp-fed"))


@pytest.fixture(scope="module")
async def fed(
    scifact_dir: Path,
    elasticsearch_url: str,
    opensearch_url: str,
    qdrant_member: QdrantServer | None,
    issuer: Issuer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Fed]:
    sf = load_scifact(scifact_dir)
    qids, dids = acl_subset(sf)
    shards = {m: [d for d in dids if shard_of(d) == m] for m in MEMBERS}
    es_index = await asyncio.to_thread(
        load_index, "elasticsearch", elasticsearch_url, sf, shards["es"], "a2m-test-fed-es-v1"
    )
    os_index = await asyncio.to_thread(
        load_index, "opensearch", opensearch_url, sf, shards["os"], "a2m-test-fed-os-v1"
    )
    path = tmp_path_factory.mktemp("qdrant-fed")
    loader = None if qdrant_member is None else server_client_args(qdrant_member)
    await asyncio.to_thread(load_qdrant_acl, path, sf, shards["qd"], loader, QD_COLLECTION)
    upstream = urlparse(opensearch_url)
    proxy = TcpProxy(upstream.hostname or "127.0.0.1", upstream.port or 9200)
    await proxy.start()
    os_store = lucene_store("opensearch", proxy.url, os_index)
    os_store["connection"] = {**os_store["connection"], "retries": 0}
    cfg = parse_config(
        {
            "server": {"auth": auth_section(issuer, [BRAVO])},
            "stores": {
                "es": lucene_store("elasticsearch", elasticsearch_url, es_index),
                "os": os_store,
                "qd": qdrant_store(path, qdrant_member, grpc=True, collection=QD_COLLECTION),
            },
            "federations": {
                "all": {
                    "members": [{"store": m, "weight": WEIGHTS[m]} for m in MEMBERS],
                    "deadline_ms": 3000,
                    "rrf_k": RRF_K,
                },
                "solo": {"members": ["os"], "deadline_ms": 3000},
                "byscore": {"members": list(MEMBERS), "fusion": "score"},
                "shards": {
                    "members": [{"store": m, "weight": WEIGHTS[m]} for m in MEMBERS],
                    "deadline_ms": 3000,
                    "fusion": "shards",
                },
            },
        }
    )
    gateway = Gateway(cfg)
    await gateway.start()
    client = asgi_client(gateway)
    yield Fed(sf, qids, dids, gateway, client, proxy)
    await client.aclose()
    await gateway.close()
    await proxy.stop()


def ids_of(result: dict[str, Any]) -> list[str]:
    if "record" in result:
        return [] if result["record"] is None else [result["record"]["id"]]
    return [r["id"] for r in result["records"]]


def member_of(fid: str) -> str:
    decoded = decode_id(fid)
    assert decoded is not None, fid
    return decoded[0]


def doc_of(fid: str) -> str:
    decoded = decode_id(fid)
    assert decoded is not None, fid
    return decoded[1]


async def test_describe_is_what_every_member_can_do(fed: Fed, issuer: Issuer) -> None:
    alice = bearer(issuer.token("alice", groups=[ALPHA]))
    d = await fed.result(alice, "memory/describe", {})
    assert d["name"] == "all"
    assert [m["store"] for m in d["members"]] == list(MEMBERS)
    assert [m["weight"] for m in d["members"]] == [WEIGHTS[m] for m in MEMBERS]
    members = [await fed.result(alice, "memory/describe", {}, store=m) for m in MEMBERS]
    common = [c for c in members[0]["capabilities"] if all(c in m["capabilities"] for m in members)]
    assert d["capabilities"] == common
    assert {"core", "keys", "embeddings", "scopes", "prompt"} <= set(d["capabilities"])
    # Same width and (no) model everywhere: embeddings kept, metrics intersected (§3.7).
    assert d["embeddings"]["dimensions"] == 384
    assert set(d["embeddings"]["metrics"]) == set.intersection(
        *(set(m["embeddings"]["metrics"]) for m in members)
    )
    assert d["limits"]["max_recall_limit"] == min(m["limits"]["max_recall_limit"] for m in members)


async def test_discovery_names_the_federations_beside_the_stores(fed: Fed) -> None:
    r = await fed.client.get("/.well-known/a2m-server.json", headers=bearer(BOB_KEY))
    assert r.status_code == 200, r.text[:300]
    doc = r.json()
    assert doc["stores"] == {m: f"/a2m/{m}" for m in MEMBERS}
    assert doc["federations"] == {n: f"/a2m/{n}" for n in ("all", "solo", "byscore", "shards")}
    one = await fed.client.get("/a2m/all/.well-known/a2m-server.json", headers=bearer(BOB_KEY))
    assert one.status_code == 200
    assert [m["store"] for m in one.json()["members"]] == list(MEMBERS)


async def test_recall_fans_out_and_fuses_by_weighted_rrf(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    spanned = set()
    for qid in fed.query_ids[:10]:
        params = {"query": fed.sf.queries[qid], "limit": 30}
        got = await fed.result(bob, "memory/recall", params)
        assert "left_out" not in got
        # The expected order, computed from each member's own answer.
        scored: list[tuple[float, str]] = []
        for m in MEMBERS:
            own = await fed.result(bob, "memory/recall", params, store=m)
            for rank, rid in enumerate(ids_of(own), start=1):
                scored.append((WEIGHTS[m] / (RRF_K + rank), encode_id(m, rid)))
        expected = [fid for _, fid in sorted(scored, key=lambda s: -s[0])][:30]
        assert ids_of(got) == expected
        scores = [r["score"] for r in got["records"]]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert scores[0] == 1.0  # first in the heaviest member
        spanned |= {member_of(fid) for fid in ids_of(got)}
        floor = scores[len(scores) // 2]
        above = await fed.result(bob, "memory/recall", {**params, "min_score": floor})
        assert ids_of(above) == [r["id"] for r in got["records"] if r["score"] >= floor]
    assert spanned == set(MEMBERS)


async def test_score_fusion_merges_by_member_score(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    for qid in fed.query_ids[:5]:
        params = {"embedding": fed.sf.query_vector(qid), "limit": 20}
        got = await fed.result(bob, "memory/recall", params, store="byscore")
        merged = []
        for m in MEMBERS:
            own = await fed.result(bob, "memory/recall", params, store=m)
            merged += [(r["score"], encode_id(m, r["id"])) for r in own["records"]]
        # Cosine scores mean the same on every engine: the merge is one ranking.
        expected = [fid for _, fid in sorted(merged, key=lambda s: -s[0])][:20]
        assert ids_of(got) == expected
        assert [r["score"] for r in got["records"]] == sorted((s for s, _ in merged), reverse=True)[
            :20
        ]


async def test_hybrid_and_vector_recall_span_the_members(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    qid = fed.query_ids[0]
    vector = {"embedding": fed.sf.query_vector(qid), "limit": 30}
    hybrid = {**vector, "query": fed.sf.queries[qid]}
    for params in (vector, hybrid):
        got = await fed.result(bob, "memory/recall", params)
        assert {member_of(fid) for fid in ids_of(got)} == set(MEMBERS)


async def test_ids_route_back_to_their_member(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    query = {"query": fed.sf.queries[fed.query_ids[1]], "limit": 30}
    got = await fed.result(bob, "memory/recall", query)
    by_member = {member_of(fid): fid for fid in ids_of(got)}
    assert set(by_member) == set(MEMBERS)
    for m, fid in by_member.items():
        one = await fed.result(bob, "memory/recall", {"where": {"id": fid}})
        assert ids_of(one) == [fid]
        tl = await fed.result(bob, "memory/timeline", {"where": {"id": fid}})
        assert ids_of(tl) == [fid]
        fetched = await fed.result(bob, "memory/fetch", {"key": f"scifact/{doc_of(fid)}"})
        assert ids_of(fetched) == [fid]
        assert shard_of(doc_of(fid)) == m
    pair = list(by_member.values())[:2]
    both = await fed.result(bob, "memory/recall", {"where": {"id": pair}, "limit": 10})
    assert sorted(ids_of(both)) == sorted(pair)
    # An id that names no member, or a member's id under another member, matches nothing.
    fid = pair[0]
    other = next(m for m in MEMBERS if m != member_of(fid))
    for wrong in (doc_of(fid), f"zz:{doc_of(fid)}", encode_id(other, doc_of(fid))):
        assert ids_of(await fed.result(bob, "memory/recall", {"where": {"id": wrong}})) == []


async def test_a_where_key_a_member_does_not_expose_matches_nothing_there(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    # `year` is mapped on the Qdrant member only.
    years = [2000 + y for y in range(20)]
    got = await fed.result(bob, "memory/timeline", {"where": {"year": years}, "limit": 100})
    assert ids_of(got)
    assert {member_of(fid) for fid in ids_of(got)} == {"qd"}


async def test_timeline_merges_the_members_streams(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    got = await fed.result(bob, "memory/timeline", {"limit": 25})
    streams = []
    for m in MEMBERS:
        own = await fed.result(bob, "memory/timeline", {"limit": 25}, store=m)
        streams += [{**r, "id": encode_id(m, r["id"])} for r in own["records"]]
    expected = sorted(streams, key=lambda r: r["created_at"])[-25:]
    assert ids_of(got) == [r["id"] for r in expected]
    stamps = [r["created_at"] for r in got["records"]]
    assert stamps == sorted(stamps)
    assert len({member_of(fid) for fid in ids_of(got)}) >= 2
    # Recall without a query: the newest first, across members.
    recent = await fed.result(bob, "memory/recall", {"limit": 25})
    assert ids_of(recent) == list(reversed(ids_of(got)))


async def test_prompt_renders_the_fused_records(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    params = {"query": fed.sf.queries[fed.query_ids[2]], "limit": 5, "prompt": True}
    got = await fed.result(bob, "memory/recall", params)
    assert got["prompt_ids"] == ids_of(got)
    assert got["records"][0]["content"].split()[0] in got["prompt"]


async def test_each_member_keeps_its_scope(fed: Fed, issuer: Issuer) -> None:
    rng = random.Random("federated-scope")
    alice = bearer(issuer.token("alice", groups=[ALPHA], exp_in=3600))
    sem = asyncio.Semaphore(8)
    leaks: list[tuple[str, dict[str, Any]]] = []
    returned = 0
    non_empty = 0

    def call() -> tuple[str, dict[str, Any]]:
        target = rng.choice(fed.b_only if rng.random() < 0.6 else fed.doc_ids)
        params: dict[str, Any] = {"limit": rng.randint(1, 50)}
        roll = rng.random()
        if roll < 0.3:
            params["query"] = fed.sf.titles[target]
        elif roll < 0.5:
            params["embedding"] = fed.sf.doc_vector(target)
        elif roll < 0.6:
            params["query"] = fed.sf.titles[target]
            params["embedding"] = fed.sf.query_vector(rng.choice(fed.query_ids))
        elif roll < 0.7:
            pass
        elif roll < 0.85:
            return "memory/timeline", params
        else:
            return "memory/fetch", {"key": f"scifact/{target}"}
        if rng.random() < 0.2:
            params["where"] = {"id": encode_id(shard_of(target), target)}
        elif rng.random() < 0.2:
            params["key_prefix"] = f"scifact/{target[:2]}"
        return "memory/recall", params

    async def one(method: str, params: dict[str, Any]) -> None:
        nonlocal returned, non_empty
        async with sem:
            answer = await fed.call(alice, method, params)
        assert "error" not in answer, (method, params, answer["error"])
        ids = ids_of(answer["result"])
        returned += len(ids)
        non_empty += bool(ids)
        leaks.extend((fid, params) for fid in ids if not visible([ALPHA], doc_of(fid)))

    calls = [call() for _ in range(300)]
    await asyncio.gather(*(one(*c) for c in calls))
    assert leaks == [], f"{len(leaks)} documents alice may not see: {leaks[:3]}"
    assert non_empty > len(calls) // 2
    # Control: the same vector probes find bob's documents for bob, in every member.
    bob = bearer(BOB_KEY)
    found: set[str] = set()
    for doc_id in fed.b_only[:30]:
        probe = {"embedding": fed.sf.doc_vector(doc_id), "limit": 20}  # past es's heavier weight
        fid = encode_id(shard_of(doc_id), doc_id)
        if fid in ids_of(await fed.result(bob, "memory/recall", probe)):
            found.add(shard_of(doc_id))
        assert fid not in ids_of(await fed.result(alice, "memory/recall", probe))
    assert found == set(MEMBERS)


async def test_a_killed_member_gives_a_partial_answer_then_recovers(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    params = {"query": fed.sf.queries[fed.query_ids[3]], "limit": 30}
    full = await fed.result(bob, "memory/recall", params)
    assert "os" in {member_of(fid) for fid in ids_of(full)}
    try:
        await fed.proxy.stop()
        part = await fed.result(bob, "memory/recall", params)
        assert part["left_out"] == [{"member": "os", "reason": "engine_unavailable"}]
        assert {member_of(fid) for fid in ids_of(part)} == {"es", "qd"}
        tl = await fed.result(bob, "memory/timeline", {"limit": 10})
        assert tl["left_out"] == [{"member": "os", "reason": "engine_unavailable"}]
        ready = await fed.client.get("/readyz")
        assert ready.json()["federations"]["all"] == {
            "ready": True,
            "members": {"es": True, "os": False, "qd": True},
        }
        metrics = (await fed.client.get("/metrics")).text
        assert 'a2m_federation_left_out_total{federation="all",member="os"' in metrics
        # Every member failed: the engine-trouble error, retryable.
        solo = await fed.call(bob, "memory/recall", params, store="solo")
        assert solo["error"]["code"] == -32603
        assert solo["error"]["data"]["reason"] == "engine_unavailable"
        assert solo["error"]["data"]["retryable"] is True

        # A node that accepts connections and never answers: left out at the deadline.
        fed.proxy.stalled = True
        await fed.proxy.start()
        stalled = await fed.result(bob, "memory/recall", params)
        assert stalled["left_out"] == [{"member": "os", "reason": "deadline_exceeded"}]
        assert {member_of(fid) for fid in ids_of(stalled)} == {"es", "qd"}
        solo = await fed.call(bob, "memory/recall", params, store="solo")
        assert solo["error"]["data"]["reason"] == "deadline_exceeded"
    finally:
        await fed.proxy.stop()
        fed.proxy.stalled = False
        await fed.proxy.start()
    back = await fed.result(bob, "memory/recall", params)
    assert "left_out" not in back
    assert ids_of(back) == ids_of(full)
    ready = await fed.client.get("/readyz")
    assert ready.json()["federations"]["all"]["members"]["os"] is True


async def test_bad_input_gets_one_canonical_error(fed: Fed, issuer: Issuer) -> None:
    bob = bearer(BOB_KEY)
    cases: list[tuple[dict[str, Any], int]] = [
        ({"query": "x" * 5000}, -32602),
        ({"query": "cells", "limit": 101}, -32602),
        ({"query": "cells", "tier": "long"}, -32003),
        ({"embedding": [0.1] * 3}, -32008),
        ({"where": {"created_at": "not a time"}}, -32602),
        ({"query": "cells", "prompt": {"model": "gpt"}}, -32602),
    ]
    for params, code in cases:
        answer = await fed.call(bob, "memory/recall", params)
        assert answer["error"]["code"] == code, (params, answer)
    assert (await fed.call(bob, "memory/remember", {"content": "x"}))["error"]["code"] == -32004
    # Alice acting for an owner she may not: refused as by every member.
    alice = bearer(issuer.token("alice", groups=[ALPHA]))
    denied = await fed.call(alice, "memory/timeline", {"owner": "bob"})
    assert denied["error"]["code"] == -32005


DEPTH = 100  # fusion shards asks each member as deep as its hybrid legs (candidates)


def calibrated_values(answers: dict[str, dict[str, Any]]) -> list[tuple[str, float]]:
    """Members' lexical answers merged by z-score over each list, shifted by log weight."""
    top = max(WEIGHTS.values())
    scored: list[tuple[float, str]] = []
    for m, own in answers.items():
        scores = [r["score"] for r in own["records"]]
        mean, spread = statistics.fmean(scores), statistics.pstdev(scores)
        for r in own["records"]:
            z = (r["score"] - mean) / spread + math.log(WEIGHTS[m] / top)
            scored.append((z, encode_id(m, r["id"])))
    return [(fid, z) for z, fid in sorted(scored, key=lambda s: -s[0])]


def calibrated(answers: dict[str, dict[str, Any]]) -> list[str]:
    return [fid for fid, _ in calibrated_values(answers)]


def by_score_values(answers: dict[str, dict[str, Any]]) -> list[tuple[str, float]]:
    top = max(WEIGHTS.values())
    scored = [
        (WEIGHTS[m] * r["score"] / top, encode_id(m, r["id"]))
        for m, own in answers.items()
        for r in own["records"]
    ]
    return [(fid, s) for s, fid in sorted(scored, key=lambda s: -s[0])]


def zscore_fused(legs: list[list[tuple[str, float]]]) -> dict[str, float]:
    """Equal-weight sum of each list's z-scores; a list's lowest z for what it missed."""
    fused: dict[str, float] = {}
    for leg in legs:
        values = [v for _, v in leg]
        mean, spread = statistics.fmean(values), statistics.pstdev(values)
        zs = {fid: (v - mean) / spread for fid, v in leg}
        floor = min(zs.values())
        for fid in [f for other in legs for f, _ in other]:
            fused.setdefault(fid, 0.0)
        for fid in fused:
            fused[fid] += 0.5 * zs.get(fid, floor)
    return fused


def by_score(answers: dict[str, dict[str, Any]]) -> list[str]:
    top = max(WEIGHTS.values())
    scored = [
        (WEIGHTS[m] * r["score"] / top, encode_id(m, r["id"]))
        for m, own in answers.items()
        for r in own["records"]
    ]
    return [fid for _, fid in sorted(scored, key=lambda s: -s[0])]


async def test_shards_fusion_calibrates_lexical_scores_per_member(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    spanned = set()
    for qid in fed.query_ids[:8]:
        params = {"query": fed.sf.queries[qid], "limit": 20}
        got = await fed.result(bob, "memory/recall", params, store="shards")
        assert "left_out" not in got
        deep = {**params, "limit": DEPTH}
        own = {m: await fed.result(bob, "memory/recall", deep, store=m) for m in MEMBERS}
        assert ids_of(got) == calibrated(own)[:20]
        scores = [r["score"] for r in got["records"]]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 < s < 1.0 for s in scores)
        spanned |= {member_of(fid) for fid in ids_of(got)}
    assert spanned == set(MEMBERS)


async def test_shards_fusion_fuses_the_merged_legs_as_one_store(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    for qid in fed.query_ids[:5]:
        vector, text = fed.sf.query_vector(qid), fed.sf.queries[qid]
        got = await fed.result(
            bob, "memory/recall", {"query": text, "embedding": vector, "limit": 20}, "shards"
        )
        # Each leg from the members' own text-only and embedding-only answers.
        lex = {
            m: await fed.result(bob, "memory/recall", {"query": text, "limit": DEPTH}, m)
            for m in MEMBERS
        }
        dense = {
            m: await fed.result(bob, "memory/recall", {"embedding": vector, "limit": DEPTH}, m)
            for m in MEMBERS
        }
        # The stores' default fusion (z-score) over the two merged legs.
        fused = zscore_fused([calibrated_values(lex)[:DEPTH], by_score_values(dense)[:DEPTH]])
        expected = sorted(fused, key=lambda f: -fused[f])[:20]
        assert ids_of(got) == expected
        assert [r["score"] for r in got["records"]] == pytest.approx(
            [1 / (1 + math.exp(-fused[f])) for f in expected], abs=1e-6
        )
        only_vector = await fed.result(
            bob, "memory/recall", {"embedding": vector, "limit": 20}, "shards"
        )
        assert ids_of(only_vector) == by_score(dense)[:20]


async def test_shards_fusion_leaves_a_killed_member_out(fed: Fed) -> None:
    bob = bearer(BOB_KEY)
    qid = fed.query_ids[3]
    params = {"query": fed.sf.queries[qid], "embedding": fed.sf.query_vector(qid), "limit": 30}
    full = await fed.result(bob, "memory/recall", params, store="shards")
    assert "os" in {member_of(fid) for fid in ids_of(full)}
    try:
        await fed.proxy.stop()
        part = await fed.result(bob, "memory/recall", params, store="shards")
        assert part["left_out"] == [{"member": "os", "reason": "engine_unavailable"}]
        assert {member_of(fid) for fid in ids_of(part)} == {"es", "qd"}
        lexical = {"query": params["query"], "limit": 30}
        part = await fed.result(bob, "memory/recall", lexical, store="shards")
        assert part["left_out"] == [{"member": "os", "reason": "engine_unavailable"}]
        assert {member_of(fid) for fid in ids_of(part)} == {"es", "qd"}
    finally:
        await fed.proxy.start()
    back = await fed.result(bob, "memory/recall", params, store="shards")
    assert "left_out" not in back
    assert ids_of(back) == ids_of(full)
