"""Scopes as document-level security (§6, docs/protocol.md), on each transport.

The engine here is :class:`MemoryConnector`, which applies filters as the real
connectors do; what is checked is what the store asks of it, and what comes
back. The same rules on real engines are in ``test_scoped_engines.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from connectors.base import Condition, Connector
from gateway.a2m.dispatcher import Dispatcher
from gateway.a2m.errors import ErrorCode
from gateway.config import ConfigError, parse_config
from gateway.runtime import Gateway
from gateway.security.scopes import (
    LOCAL,
    Caller,
    NothingVisible,
    Principal,
    ScopePolicy,
    claim_values,
)
from gateway.store.store import Store
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.security.support import (
    BOB_KEY,
    SPARSE,
    Issuer,
    MemoryConnector,
    acl_docs,
    asgi_client,
    auth_section,
    bearer,
    build_gateway,
    memory_store_config,
    rpc,
    visible_to,
    write_qdrant,
)

ACL = {"filters": [{"field": "acl", "claims": ["groups"]}]}


def store_of(scope: dict[str, Any] | None = None, **mapping: Any) -> tuple[Store, MemoryConnector]:
    cfg = parse_config({"stores": {"docs": memory_store_config(scope=scope, **mapping)}})
    engine = MemoryConnector(acl_docs())
    return Store("docs", cfg.stores["docs"], engine), engine


def owners(records: list[dict[str, Any]], engine: MemoryConnector) -> set[str]:
    by_id = dict(engine.docs)
    return {by_id[r["id"]]["own"] for r in records}


async def call(client: InProcessClient, method: str, params: dict[str, Any]) -> Any:
    return await client.call(method, params)


# -- local transports: owner at face value ---------------------------------------------------------


async def test_local_owner_filters_the_owner_field() -> None:
    store, engine = store_of()
    client = InProcessClient(Dispatcher(store))
    d = await call(client, "memory/describe", {})
    assert "scopes" in d["capabilities"]
    assert d["capabilities"][-1] == "prompt"
    mine = await call(client, "memory/recall", {"query": "deploy", "owner": "bob", "limit": 100})
    assert mine["records"]
    assert owners(mine["records"], engine) == {"bob"}
    tl = await call(client, "memory/timeline", {"owner": "carol", "limit": 100})
    assert owners(tl["records"], engine) == {"carol"}
    everyone = await call(client, "memory/timeline", {"limit": 100})
    assert owners(everyone["records"], engine) == {"alice", "bob", "carol"}
    # fetch: doc/1 belongs to bob.
    assert (await call(client, "memory/fetch", {"key": "doc/1", "owner": "bob"}))["record"]
    assert (await call(client, "memory/fetch", {"key": "doc/1", "owner": "alice"}))[
        "record"
    ] is None


async def test_local_without_an_owner_field_declares_no_scopes_and_ignores_owner() -> None:
    store, _ = store_of(owner=False)
    client = InProcessClient(Dispatcher(store))
    assert "scopes" not in (await call(client, "memory/describe", {}))["capabilities"]
    a = await call(client, "memory/timeline", {"limit": 100})
    b = await call(client, "memory/timeline", {"limit": 100, "owner": "alice"})
    assert a == b


async def test_claim_filters_fail_closed_without_a_principal() -> None:
    # stdio and in-process carry no credential: a store scoped by claims shows nothing.
    store, engine = store_of(scope=ACL)
    client = InProcessClient(Dispatcher(store))
    assert (await call(client, "memory/recall", {"query": "deploy"}))["records"] == []
    assert (await call(client, "memory/timeline", {}))["records"] == []
    assert (await call(client, "memory/fetch", {"key": "doc/0"}))["record"] is None
    assert engine.calls == 0


async def test_in_process_with_a_principal_is_scoped_like_http() -> None:
    store, engine = store_of(scope=ACL)
    alice = Principal("alice", {"sub": "alice", "groups": ["team-a"]}, "embedded")
    client = InProcessClient(Dispatcher(store), principal=alice)
    assert "scopes" in (await call(client, "memory/describe", {}))["capabilities"]
    got = await call(client, "memory/timeline", {"limit": 100})
    assert {r["id"] for r in got["records"]} == {
        i for i, s in engine.docs if visible_to(["team-a"], s)
    }
    with pytest.raises(A2MRemoteError) as info:
        await call(client, "memory/recall", {"query": "x", "owner": "bob"})
    assert info.value.code == -32005


# -- HTTP ------------------------------------------------------------------------------------------


@dataclass
class Http:
    client: httpx.AsyncClient
    engine: MemoryConnector
    gateway: Gateway
    headers: dict[str, str] = field(default_factory=dict)

    async def call(self, method: str, params: dict[str, Any], **headers: str) -> dict[str, Any]:
        sent = {"content-type": "application/json", **self.headers, **headers}
        r = await self.client.post(
            "/a2m/docs", content=json.dumps(rpc(method, params)), headers=sent
        )
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body


async def http_app(
    server: dict[str, Any], scope: dict[str, Any] | None = None, **mapping: Any
) -> Http:
    engine = MemoryConnector(acl_docs())
    gateway = build_gateway(
        server, {"docs": memory_store_config(scope=scope, **mapping)}, {"docs": engine}
    )
    return Http(asgi_client(gateway), engine, gateway)


async def test_unauthenticated_http_never_declares_scopes_and_ignores_owner() -> None:
    h = await http_app({})
    d = (await h.call("memory/describe", {}))["result"]
    assert "scopes" not in d["capabilities"]
    a = (await h.call("memory/timeline", {"limit": 100}))["result"]
    b = (await h.call("memory/timeline", {"limit": 100, "owner": "alice"}))["result"]
    assert a == b
    assert len(a["records"]) == len(h.engine.docs)
    await h.client.aclose()


async def test_authenticated_store_without_scope_rules_declares_no_scopes(issuer: Issuer) -> None:
    h = await http_app({"auth": auth_section(issuer)}, owner=None)
    h.headers = bearer(issuer.token(groups=["team-a"]))
    assert "scopes" not in (await h.call("memory/describe", {}))["result"]["capabilities"]
    # owner belongs to an undeclared capability: ignored (§2), neither filter nor refusal.
    a = (await h.call("memory/timeline", {"limit": 100, "owner": "bob"}))["result"]
    assert len(a["records"]) == len(h.engine.docs)
    await h.client.aclose()


async def test_owner_field_without_filters_narrows_to_the_principal(issuer: Issuer) -> None:
    # With mapping.owner but no scope.filters, owner "bob" from alice
    # answered every record. It is now checked against the principal on every transport.
    h = await http_app({"auth": auth_section(issuer)})
    h.headers = bearer(issuer.token("alice"))
    assert "scopes" in (await h.call("memory/describe", {}))["result"]["capabilities"]
    for method, params in (
        ("memory/recall", {"query": "deploy"}),
        ("memory/timeline", {}),
        ("memory/fetch", {"key": "doc/1"}),
    ):
        denied = await h.call(method, {**params, "owner": "bob"})
        assert denied["error"]["code"] == ErrorCode.SCOPE_DENIED, (method, denied)
    mine = (await h.call("memory/timeline", {"limit": 100, "owner": "alice"}))["result"]
    assert mine["records"]
    assert owners(mine["records"], h.engine) == {"alice"}
    await h.client.aclose()
    # The same store in process, with a principal: the same answers.
    store, engine = store_of()
    client = InProcessClient(Dispatcher(store), principal=Principal("alice", {}, "embedded"))
    with pytest.raises(A2MRemoteError) as info:
        await call(client, "memory/timeline", {"owner": "bob"})
    assert info.value.code == ErrorCode.SCOPE_DENIED
    client = InProcessClient(
        Dispatcher(store), principal=Principal("alice", {"sub": "alice"}, "embedded")
    )
    got = await call(client, "memory/timeline", {"owner": "alice", "limit": 100})
    assert got["records"]
    assert owners(got["records"], engine) == {"alice"}


async def test_an_empty_string_claim_sees_nothing(issuer: Issuer) -> None:
    # A claim value "" must not match documents whose ACL field is "".
    h = await http_app({"auth": auth_section(issuer)}, scope=ACL)
    h.engine.docs.append(("blank", {"body": "deploy keys", "k": "doc/blank", "acl": [""]}))
    for groups in ([""], "", ["", "team-z"]):
        h.headers = bearer(issuer.token("alice", groups=groups))
        got = (await h.call("memory/timeline", {"limit": 100}))["result"]
        assert got["records"] == [], groups
    h.headers = bearer(issuer.token("alice", groups=["team-a"]))
    assert (await h.call("memory/timeline", {"limit": 100}))["result"]["records"]  # control
    await h.client.aclose()
    assert claim_values({"g": ["", "x", ""]}, "g") == ("x",)


async def test_owner_must_be_the_principal(issuer: Issuer) -> None:
    h = await http_app({"auth": auth_section(issuer)}, scope=ACL)
    h.headers = bearer(issuer.token("alice", groups=["team-a", "team-b"]))
    denied = await h.call("memory/recall", {"query": "deploy", "owner": "bob"})
    assert denied["error"]["code"] == -32005
    assert denied["error"]["data"] == {"param": "owner"}
    for method, params in (
        ("memory/timeline", {}),
        ("memory/fetch", {"key": "doc/1"}),
        ("memory/describe", {}),  # canonical §4.1: describe takes owner where scopes is declared
    ):
        assert (await h.call(method, {**params, "owner": "bob"}))["error"]["code"] == -32005
    assert "result" in await h.call("memory/describe", {"owner": "alice"})
    # Its own owner narrows to its own records, still inside its groups.
    mine = (await h.call("memory/timeline", {"limit": 100, "owner": "alice"}))["result"]
    assert mine["records"]
    assert owners(mine["records"], h.engine) == {"alice"}
    # API-key principal: owner is its subject.
    h.headers = bearer(BOB_KEY)
    assert "result" in await h.call("memory/timeline", {"owner": "bob"})
    assert (await h.call("memory/timeline", {"owner": "alice"}))["error"]["code"] == -32005
    await h.client.aclose()


async def test_owner_claim_is_configurable(issuer: Issuer) -> None:
    scope = {**ACL, "owner_claim": "email"}
    h = await http_app({"auth": auth_section(issuer)}, scope=scope)
    h.headers = bearer(issuer.token("u-1", groups=["team-a"], email="alice"))
    assert "result" in await h.call("memory/timeline", {"owner": "alice"})
    assert (await h.call("memory/timeline", {"owner": "u-1"}))["error"]["code"] == -32005
    await h.client.aclose()


async def test_claims_with_prefixes_and_two_rules(issuer: Issuer) -> None:
    # acl holds team names or "user:<sub>"; own must be one of the principal's delegations.
    scope = {
        "filters": [
            {"field": "acl", "claims": ["groups", {"claim": "sub", "prefix": "user:"}]},
            {"field": "own", "claims": ["delegates"]},
        ]
    }
    h = await http_app({"auth": auth_section(issuer)}, scope=scope)
    h.headers = bearer(issuer.token("alice", groups=["team-b"], delegates=["bob", "carol"]))
    await h.call("memory/timeline", {"limit": 100})
    must = h.engine.ordered_reads[-1].filter.must
    assert must == (
        Condition(field="acl", values=("team-b", "user:alice")),
        Condition(field="own", values=("bob", "carol")),
    )
    await h.client.aclose()


def test_strip_prefix_reads_group_paths_under_one_parent_only() -> None:
    # Keycloak's groups claim holds full paths; /A and /other/A are other groups than /tenants/A.
    scope = {"filters": [{"field": "acl", "claims": [{"claim": "groups", "strip_prefix": "/t/"}]}]}
    cfg = parse_config({"stores": {"docs": memory_store_config(scope=scope)}})
    policy = ScopePolicy(cfg.stores["docs"])
    groups = ["/t/A", "/A", "/other/t/B", "/t/", "/t/B/sub", 7, "/t/A"]
    principal = Principal("p", {"groups": groups}, "jwt")
    (cond,) = policy.conditions(Caller(network=True, principal=principal), None)
    assert cond == Condition(field="acl", values=("A", "B/sub"))
    outside = Principal("p", {"groups": ["/A", "/other/A"]}, "jwt")
    with pytest.raises(NothingVisible):
        policy.conditions(Caller(network=True, principal=outside), None)


def test_claim_values_reads_literal_names_and_dotted_paths() -> None:
    claims = {
        "https://example.com/groups": ["a", "b", "a"],
        "realm_access": {"roles": ["r1", {"nested": 1}, 7]},
        "single": "x",
        "obj": {"k": "v"},
    }
    assert claim_values(claims, "https://example.com/groups") == ("a", "b")
    assert claim_values(claims, "realm_access.roles") == ("r1", 7)
    assert claim_values(claims, "single") == ("x",)
    assert claim_values(claims, "obj") == ()
    assert claim_values(claims, "missing.path") == ()


def test_a_huge_claim_list_admits_nothing() -> None:
    cfg = parse_config({"stores": {"docs": memory_store_config(scope=ACL)}})
    policy = ScopePolicy(cfg.stores["docs"])
    many = Principal("p", {"groups": [f"g{i}" for i in range(10_000)]}, "jwt")
    with pytest.raises(NothingVisible):
        policy.conditions(Caller(network=True, principal=many), None)
    some = Principal("p", {"groups": [f"g{i}" for i in range(100)]}, "jwt")
    (cond,) = policy.conditions(Caller(network=True, principal=some), None)
    assert len(cond.values) == 100
    with pytest.raises(NothingVisible):
        policy.conditions(LOCAL, None)


# -- forwarding the caller's credential to the engine ----------------------------------------------


@dataclass
class ForwardingConnector(MemoryConnector):
    """Records the Authorization each per-call view was made for."""

    authorizations: list[str] = field(default_factory=list)

    def for_caller(self, authorization: str) -> Connector:
        self.authorizations.append(authorization)
        return self


async def test_forwarding_sends_the_callers_token_and_refuses_api_keys(issuer: Issuer) -> None:
    engine = ForwardingConnector(acl_docs())
    gateway = build_gateway(
        {"auth": auth_section(issuer)},
        {"docs": memory_store_config(scope={"forward_credential": True})},
        {"docs": engine},
    )
    h = Http(asgi_client(gateway), engine, gateway)
    token = issuer.token(groups=["team-a"])
    h.headers = bearer(token)
    assert "scopes" in (await h.call("memory/describe", {}))["result"]["capabilities"]
    assert "result" in await h.call("memory/recall", {"query": "deploy"})
    assert "result" in await h.call("memory/timeline", {})
    assert "result" in await h.call("memory/fetch", {"key": "doc/0"})
    assert engine.authorizations == [f"Bearer {token}"] * 3
    # An API key means nothing to the engine: refused rather than read with our own rights.
    h.headers = bearer(BOB_KEY)
    assert (await h.call("memory/recall", {"query": "deploy"}))["error"]["code"] == -32005
    assert len(engine.authorizations) == 3
    await h.client.aclose()


async def test_forwarding_with_a_connector_that_cannot_forward_never_serves() -> None:
    # Until the connector can forward, the store never opens: reading with the gateway's
    # own credential would bypass the engine's document security.
    cfg = parse_config(
        {"stores": {"docs": memory_store_config(scope={"forward_credential": True})}}
    )
    engine = MemoryConnector(acl_docs())
    store = Store("docs", cfg.stores["docs"], engine)
    client = InProcessClient(Dispatcher(store))
    for method in ("memory/describe", "memory/timeline"):
        with pytest.raises(A2MRemoteError) as info:
            await call(client, method, {})
        assert info.value.code == -32603  # an operator error, as any unusable store config
    assert not store.started
    assert engine.calls == 0


def test_forwarding_is_refused_on_qdrant() -> None:
    store = {
        "backend": "qdrant",
        "index": "c",
        "connection": {"location": ":memory:"},
        "mapping": {"content": "body"},
        "search": {"mode": "lexical", "sparse_vector": "s"},
        "scope": {"forward_credential": True},
    }
    with pytest.raises(ConfigError, match="forward_credential"):
        parse_config({"stores": {"c": store}})


# -- the real processes: stdio is local, unauthenticated HTTP is not ----------------------------


def _owner_store(tmp_path: Path, name: str) -> dict[str, Any]:
    docs = [
        (i + 1, {"text": f"note {i} about rotation", "owner": ["alice", "bob"][i % 2]})
        for i in range(10)
    ]
    path = tmp_path / name
    write_qdrant(path, "notes", docs, "text")
    return {
        "backend": "qdrant",
        "index": "notes",
        "connection": {"path": str(path)},
        "mapping": {"content": "text", "owner": "owner"},
        "search": {"mode": "lexical", "sparse_vector": SPARSE},
    }


@pytest.mark.integration
def test_stdio_declares_scopes_and_filters_owner_but_plain_http_does_not(tmp_path: Path) -> None:
    from tests.conformance.conftest import HttpClient, start_http_server, start_stdio_server

    stdio_cfg = tmp_path / "stdio.yaml"
    stdio_cfg.write_text(yaml.safe_dump({"stores": {"notes": _owner_store(tmp_path, "a")}}))
    http_cfg = tmp_path / "http.yaml"
    http_cfg.write_text(yaml.safe_dump({"stores": {"notes": _owner_store(tmp_path, "b")}}))

    stdio = start_stdio_server(tmp_path / "stdio", stdio_cfg)
    try:
        d = stdio.client.call("memory/describe", {"protocol": "a2m/0.1"})
        assert "scopes" in d["capabilities"]
        everyone = stdio.client.call("memory/recall", {"query": "rotation", "limit": 20})
        mine = stdio.client.call("memory/recall", {"query": "rotation", "owner": "bob"})
        assert len(everyone["records"]) == 10
        assert len(mine["records"]) == 5
    finally:
        assert stdio.stop() == 0

    server = start_http_server(tmp_path / "http", http_cfg)
    client = HttpClient(server.base_url, "/a2m/notes")
    try:
        d = client.call("memory/describe", {"protocol": "a2m/0.1"})
        assert "scopes" not in d["capabilities"]  # §6: unauthenticated network transport
        got = client.call("memory/recall", {"query": "rotation", "owner": "bob", "limit": 20})
        assert len(got["records"]) == 10  # owner ignored (§2), not trusted
    finally:
        client.close()
        server.stop()
