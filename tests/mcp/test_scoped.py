"""Auth and document-level security through MCP, on a real `a2m-gateway serve`.

One process serves the ACL'd SciFact corpus of ``tests/security/acl_corpus.py``
from Elasticsearch, OpenSearch and Qdrant (three stores, and ``scifact-all``, a
federation of the three), with the security
suite's credentials: alice is an RS256 JWT with ``groups: [ALPHA]`` whose
audience is the MCP resource (RFC 8707 check on), bob an API key with
``groups: [BRAVO]``. Alice's MCP calls, many aimed at bob's documents (their
titles, ids and keys), must return only documents whose ACL names ALPHA; a
control shows the same probes find them for bob.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.federation.federation import decode_id, encode_id
from tests.conformance.conftest import HttpServer, start_http_server
from tests.conftest import QdrantServer
from tests.mcp.support import mcp_http, structured, tools_by_name
from tests.security.acl_corpus import (
    ALPHA,
    BRAVO,
    NOBODY,
    acl_subset,
    load_index,
    load_qdrant_acl,
    lucene_store,
    qdrant_store,
    server_client_args,
    visible,
)
from tests.security.support import AUDIENCE, BOB_KEY, ISSUER, Issuer, auth_section, bearer
from tests.support.scifact import SciFact, load_scifact

COLLECTION = "a2m-test-mcp-acl"
"""The Qdrant store's collection on the server."""

pytestmark = [pytest.mark.integration, pytest.mark.elasticsearch, pytest.mark.opensearch]

RESOURCE = "https://gateway.test.example/mcp"
STORES = ("scifact-es", "scifact-os", "scifact-qd")
FEDERATION = "scifact-all"
"""A federation of the three stores, each member under its own scope filter."""
CALLS_PER_STORE = 200
CONCURRENCY = 8


@dataclass
class Scoped:
    server: HttpServer
    sf: SciFact
    doc_ids: list[str]
    query_ids: list[str]

    @property
    def b_only(self) -> list[str]:
        return [d for d in self.doc_ids if visible([BRAVO], d) and not visible([ALPHA], d)]


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Issuer:
    return Issuer.create(tmp_path_factory.mktemp("mcp-idp"))


@pytest.fixture(scope="module")
def scoped(
    tmp_path_factory: pytest.TempPathFactory,
    scifact_dir: Path,
    elasticsearch_url: str,
    opensearch_url: str,
    qdrant_member: QdrantServer | None,
    issuer: Issuer,
) -> Iterator[Scoped]:
    sf = load_scifact(scifact_dir)
    qids, dids = acl_subset(sf)
    qdrant = tmp_path_factory.mktemp("mcp-qdrant-acl")
    loader = None if qdrant_member is None else server_client_args(qdrant_member)
    load_qdrant_acl(qdrant, sf, dids, loader, collection=COLLECTION)
    stores = {
        "scifact-es": lucene_store(
            "elasticsearch",
            elasticsearch_url,
            load_index("elasticsearch", elasticsearch_url, sf, dids),
        ),
        "scifact-os": lucene_store(
            "opensearch", opensearch_url, load_index("opensearch", opensearch_url, sf, dids)
        ),
        "scifact-qd": qdrant_store(qdrant, qdrant_member, collection=COLLECTION),
    }
    auth = auth_section(issuer, [BRAVO])
    auth["jwt"]["audience"] = [AUDIENCE, RESOURCE]
    root = tmp_path_factory.mktemp("mcp-scoped")
    config = root / "gateway.yaml"
    doc = {
        "server": {"auth": auth, "mcp": {"resource": RESOURCE, "audience_check": True}},
        "stores": stores,
        "federations": {FEDERATION: {"members": list(STORES), "deadline_ms": 20_000}},
    }
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    server = start_http_server(root / "data", config)
    yield Scoped(server, sf, dids, qids)
    server.stop()


def alice(issuer: Issuer) -> dict[str, str]:
    return bearer(issuer.token("alice", aud=RESOURCE, groups=[ALPHA], exp_in=3600))


# -- auth as an MCP client expects it --------------------------------------------------------------


async def test_401_points_at_the_protected_resource_metadata(
    scoped: Scoped, issuer: Issuer
) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    meta_url = "https://gateway.test.example/.well-known/oauth-protected-resource/mcp"
    async with httpx.AsyncClient(base_url=scoped.server.base_url, timeout=30) as http:
        for path, credential, error in [
            ("/mcp", None, False),
            ("/mcp", "Bearer not-a-key-0123456789abcdef0123456789", True),
            ("/mcp/scifact-es", "Bearer " + issuer.token("alice", aud=RESOURCE, exp_in=-600), True),
        ]:
            auth = {"authorization": credential} if credential else {}
            r = await http.post(path, content=body, headers={**headers, **auth})
            assert r.status_code == 401, r.text
            challenge = r.headers["www-authenticate"]
            assert challenge.startswith('Bearer realm="a2m"')
            assert f'resource_metadata="{meta_url}{path[4:]}"' in challenge
            assert ('error="invalid_token"' in challenge) is error
        # An unknown store is not told apart from a known one before authentication, and
        # nothing of the path but a configured store name is echoed into the challenge.
        probe = await http.post('/mcp/no"such', content=body, headers=headers)
        assert probe.status_code == 401
        assert f'resource_metadata="{meta_url}"' in probe.headers["www-authenticate"]
        prm = await http.get("/.well-known/oauth-protected-resource/mcp")
        assert prm.status_code == 200
        assert prm.json()["resource"] == RESOURCE
        assert prm.json()["authorization_servers"] == [ISSUER]
        assert prm.json()["bearer_methods_supported"] == ["header"]
        one = await http.get("/.well-known/oauth-protected-resource/mcp/scifact-qd")
        assert one.json()["resource"] == RESOURCE + "/scifact-qd"
        # Before authentication, a name no store has is answered as a served one is.
        missing = await http.get("/.well-known/oauth-protected-resource/mcp/nope")
        assert missing.status_code == 200
        assert missing.json() == {**one.json(), "resource": RESOURCE + "/nope"}


async def test_the_audience_must_name_the_mcp_resource(scoped: Scoped, issuer: Issuer) -> None:
    """RFC 8707: a token minted for another audience of the same issuer opens A2M, not MCP."""
    a2m_only = bearer(issuer.token("alice", aud=AUDIENCE, groups=[ALPHA]))
    body = {"jsonrpc": "2.0", "id": 1, "method": "memory/describe", "params": {}}
    async with httpx.AsyncClient(base_url=scoped.server.base_url, timeout=30) as http:
        a2m = await http.post("/a2m/scifact-es", json=body, headers=a2m_only)
        assert a2m.status_code == 200
        assert "result" in a2m.json()
        mcp = await http.post(
            "/mcp",
            content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
            headers={"content-type": "application/json", **a2m_only},
        )
        assert mcp.status_code == 401
    url = f"{scoped.server.base_url}/mcp"
    for headers in (alice(issuer), bearer(BOB_KEY)):
        async with mcp_http(url, "2026-07-28", headers) as client:
            result = await client.call_tool("timeline", {"limit": 1, "store": "scifact-qd"})
            assert not result.is_error, result.content


# -- the scoped corpus through MCP -----------------------------------------------------------------


def same_id(rng: random.Random, doc_id: str) -> str:
    """A store's own record id is the document's id."""
    return doc_id


def random_call(
    rng: random.Random, s: Scoped, id_of: Callable[[random.Random, str], str] = same_id
) -> tuple[str, dict[str, Any]]:
    """A call alice might make, most of them aimed at one of bob's documents.

    id_of: the record id the endpoint gives a document (a federation's names a member).
    """
    target = rng.choice(s.b_only if rng.random() < 0.7 else s.doc_ids)
    ident = id_of(rng, target)
    roll = rng.random()
    if roll < 0.25:
        return "fetch", {"id": rng.choice([ident, f"scifact/{target}"])}
    args: dict[str, Any] = {"limit": rng.randint(1, 30)}
    name = "timeline" if roll < 0.4 else "search"
    if name == "search":
        args["query"] = (
            s.sf.titles[target] if rng.random() < 0.6 else s.sf.queries[rng.choice(s.query_ids)]
        )
    r = rng.random()
    if r < 0.2:
        args["where"] = {"id": ident}
    elif r < 0.35:
        args["where"] = {"key": [f"scifact/{target}", f"scifact/{rng.choice(s.doc_ids)}"]}
    elif r < 0.45:
        args["key_prefix"] = f"scifact/{target[: rng.randint(1, len(target))]}"
    return name, args


def returned(result: Any) -> list[str]:
    data = result.structured_content
    if result.is_error:
        return []
    return [r["id"] for r in data["results"]] if "results" in data else [data["id"]]


async def alice_calls(
    url: str,
    mode: str,
    issuer: Issuer,
    calls: list[tuple[str, dict[str, Any]]],
    doc_ids: Callable[[list[str]], list[str]],
) -> tuple[list[tuple[str, str, dict[str, Any]]], Counter[str]]:
    """Run alice's calls on `url`: the foreign documents returned, and what came back.

    doc_ids: the SciFact ids behind the ids the endpoint returns.
    """
    sem = asyncio.Semaphore(CONCURRENCY)
    leaks: list[tuple[str, str, dict[str, Any]]] = []
    counts = Counter[str]()
    async with mcp_http(url, mode, alice(issuer)) as client:
        tools = tools_by_name((await client.list_tools()).tools)

        async def one(name: str, args: dict[str, Any]) -> None:
            async with sem:
                result = await client.call_tool(name, args)
            if name == "fetch" and result.is_error:
                counts["fetch-not-visible"] += 1
                return
            structured(result, tools[name])
            raw = json.dumps(result.structured_content) + result.content[0].text  # type: ignore[union-attr]
            for value in (ALPHA, BRAVO, NOBODY):
                assert value not in raw, f"the ACL field left the gateway ({name})"
            ids = doc_ids(returned(result))
            counts[name] += len(ids)
            counts["non-empty"] += bool(ids)
            leaks.extend((d, name, args) for d in ids if not visible([ALPHA], d))

        await asyncio.gather(*(one(*c) for c in calls))
    return leaks, counts


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("store", STORES)
async def test_alice_sees_none_of_bobs_documents_through_mcp(
    scoped: Scoped, issuer: Issuer, store: str, mode: str
) -> None:
    rng = random.Random(f"mcp-scoped-{store}-{mode}")
    calls = [random_call(rng, scoped) for _ in range(CALLS_PER_STORE)]
    url = f"{scoped.server.base_url}/mcp/{store}"
    leaks, counts = await alice_calls(url, mode, issuer, calls, list)
    assert leaks == [], f"{len(leaks)} foreign documents through MCP: {leaks[:3]}"
    # Non-vacuous: most calls returned documents, every tool did.
    assert counts["non-empty"] > CALLS_PER_STORE // 3, counts
    for name in ("search", "timeline", "fetch"):
        assert counts[name] > 0, counts
    print(f"\n{store} ({mode}): {CALLS_PER_STORE} MCP calls by alice, {dict(counts)}, 0 foreign")


@pytest.mark.parametrize("store", STORES)
async def test_the_same_probes_find_bobs_documents_for_bob(
    scoped: Scoped, issuer: Issuer, store: str
) -> None:
    url = f"{scoped.server.base_url}/mcp/{store}"
    probes = scoped.b_only[:20]
    async with (
        mcp_http(url, "2026-07-28", bearer(BOB_KEY)) as bob,
        mcp_http(url, "2026-07-28", alice(issuer)) as alice_client,
    ):
        for doc_id in probes:
            for ident in (doc_id, f"scifact/{doc_id}"):
                mine = await bob.call_tool("fetch", {"id": ident})
                assert returned(mine) == [doc_id]
                assert (await alice_client.call_tool("fetch", {"id": ident})).is_error
            where = {"where": {"id": doc_id}}
            assert returned(await bob.call_tool("timeline", where)) == [doc_id]
            assert returned(await alice_client.call_tool("timeline", where)) == []


# -- a federation is an MCP store too ------------------------------------------------------------


async def a2m(s: Scoped, headers: dict[str, str], method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with httpx.AsyncClient(base_url=s.server.base_url, timeout=60) as http:
        r = await http.post(f"/a2m/{FEDERATION}", json=body, headers=bearer(BOB_KEY) | headers)
    assert r.status_code == 200, r.text[:300]
    assert "error" not in r.json(), r.json()["error"]
    return r.json()["result"]


def doc_ids_of(ids: list[str]) -> list[str]:
    """The SciFact ids behind federation ids (`member:id`, opaque to clients)."""
    decoded = [decode_id(i) for i in ids]
    assert all(d is not None and d[0] in STORES for d in decoded), ids
    return [d[1] for d in decoded if d is not None]


async def test_a_federation_is_served_as_an_mcp_store(scoped: Scoped) -> None:
    bob = bearer(BOB_KEY)
    query = scoped.sf.queries[scoped.query_ids[0]]
    recall = await a2m(scoped, bob, "memory/recall", {"query": query, "limit": 8})
    newest = await a2m(scoped, bob, "memory/timeline", {"limit": 5})
    async with mcp_http(f"{scoped.server.base_url}/mcp", "2026-07-28", bob) as client:
        listed = tools_by_name((await client.list_tools()).tools)
    assert FEDERATION in listed["search"].input_schema["properties"]["store"]["enum"]
    url = f"{scoped.server.base_url}/mcp/{FEDERATION}"
    async with mcp_http(url, "2026-07-28", bob) as client:
        tools = tools_by_name((await client.list_tools()).tools)
        found = structured(
            await client.call_tool("search", {"query": query, "limit": 8}), tools["search"]
        )
        first = found["results"][0]
        by_id = structured(await client.call_tool("fetch", {"id": first["id"]}), tools["fetch"])
        key = f"scifact/{doc_ids_of([first['id']])[0]}"
        by_key = structured(await client.call_tool("fetch", {"id": key}), tools["fetch"])
        timeline = structured(await client.call_tool("timeline", {"limit": 5}), tools["timeline"])
    search = tools["search"]
    assert "store" not in search.input_schema["properties"]
    assert all(name in (search.description or "") for name in STORES)
    where = search.input_schema["properties"]["where"]["properties"]
    assert {"id", "key"} <= set(where)
    # The MCP tools are the federation's A2M calls: same records, same order.
    assert [r["id"] for r in found["results"]] == [r["id"] for r in recall["records"]]
    assert len({decode_id(r["id"])[0] for r in found["results"]}) > 1  # type: ignore[index]
    assert all(r["store"] == FEDERATION for r in found["results"])
    assert by_id["id"] == first["id"]
    assert by_id["text"] == recall["records"][0]["content"]
    assert doc_ids_of([by_key["id"]]) == doc_ids_of([first["id"]])
    assert [r["id"] for r in timeline["results"]] == [r["id"] for r in newest["records"]]


def member_id(rng: random.Random, doc_id: str) -> str:
    """The federation's id of the document in one of its members (each holds every one)."""
    return encode_id(rng.choice(STORES), doc_id)


async def test_alice_sees_none_of_bobs_documents_through_the_federation(
    scoped: Scoped, issuer: Issuer
) -> None:
    rng = random.Random("mcp-scoped-federation")
    calls = [random_call(rng, scoped, member_id) for _ in range(CALLS_PER_STORE)]
    url = f"{scoped.server.base_url}/mcp/{FEDERATION}"
    leaks, counts = await alice_calls(url, "2026-07-28", issuer, calls, doc_ids_of)
    assert leaks == [], f"{len(leaks)} foreign documents through the federation: {leaks[:3]}"
    assert counts["non-empty"] > CALLS_PER_STORE // 3, counts
    for name in ("search", "timeline", "fetch"):
        assert counts[name] > 0, counts
    print(f"\n{FEDERATION}: {CALLS_PER_STORE} MCP calls by alice, {dict(counts)}, 0 foreign")


async def test_the_federation_finds_bobs_documents_for_bob(scoped: Scoped, issuer: Issuer) -> None:
    url = f"{scoped.server.base_url}/mcp/{FEDERATION}"
    async with (
        mcp_http(url, "2026-07-28", bearer(BOB_KEY)) as bob,
        mcp_http(url, "2026-07-28", alice(issuer)) as alice_client,
    ):
        for n, doc_id in enumerate(scoped.b_only[:15]):
            fid = encode_id(STORES[n % len(STORES)], doc_id)
            for ident in (fid, f"scifact/{doc_id}"):
                assert doc_ids_of(returned(await bob.call_tool("fetch", {"id": ident}))) == [doc_id]
                assert (await alice_client.call_tool("fetch", {"id": ident})).is_error
            where = {"where": {"id": fid}}
            assert returned(await bob.call_tool("timeline", where)) == [fid]
            assert returned(await alice_client.call_tool("timeline", where)) == []
