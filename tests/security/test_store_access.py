"""Who may use which store (`scope.allow`): refused with -32005 naming no store, audited,
and left out of a federation without being named, on the A2M door, MCP and the try page.

The gateway's real HTTP app (in process), API keys with claims, in-memory engines.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.security.auth import hash_api_key
from tests.security.support import BOB_KEY, CAROL_KEY, MemoryConnector, acl_docs, rpc
from tests.support.asgi import asgi_client

HR_KEY = "a2m_hr-person-test-key-0123456789-abcdefghijklmnopqrstu"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _store(allow: dict[str, list[str]] | None = None) -> dict[str, Any]:
    store: dict[str, Any] = {
        "backend": "elasticsearch",
        "index": "docs",
        "connection": {"hosts": ["http://127.0.0.1:9"]},
        "mapping": {"content": "body", "key": "k", "created_at": "ts"},
        "search": {"text_fields": ["body"]},
    }
    if allow is not None:
        store["scope"] = {"allow": allow}
    return store


def _keys() -> list[dict[str, Any]]:
    return [
        {"subject": "hana", "hash": hash_api_key(HR_KEY), "claims": {"groups": ["hr"]}},
        {"subject": "bob", "hash": hash_api_key(BOB_KEY), "claims": {"groups": ["eng"]}},
        {"subject": "carol", "hash": hash_api_key(CAROL_KEY)},
    ]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    cfg = parse_config(
        {
            "server": {"auth": {"api_keys": _keys()}},
            "stores": {"wiki": _store(), "payroll": _store({"groups": ["hr"]})},
            "federations": {"everything": {"members": ["payroll", "wiki"]}},
        }
    )
    gateway = Gateway(cfg)
    for name in ("wiki", "payroll"):
        gateway.stores[name].connector = MemoryConnector(acl_docs(8))
    async with asgi_client(gateway) as http:
        yield http
    await gateway.close()


def _as(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}", "content-type": "application/json"}


async def _a2m(http: httpx.AsyncClient, path: str, key: str, method: str, params: Any) -> Any:
    reply = await http.post(path, content=json.dumps(rpc(method, params)), headers=_as(key))
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_a_store_refuses_a_caller_its_allow_list_lacks(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="a2m.audit"):
        for key in (BOB_KEY, CAROL_KEY):
            for method, params in [
                ("memory/describe", {}),
                ("memory/recall", {"query": "deploy keys"}),
                ("memory/timeline", {}),
                ("memory/fetch", {"key": "doc/1"}),
            ]:
                answer = await _a2m(client, "/a2m/payroll", key, method, params)
                assert answer["error"]["code"] == -32005, (key, method, answer)
                assert "payroll" not in json.dumps(answer)
    audited = [r for r in caplog.records if r.getMessage() == "call"]
    assert [getattr(r, "code", None) for r in audited] == [-32005] * 8
    assert {getattr(r, "principal", None) for r in audited} == {"api_key/bob", "api_key/carol"}
    # Control: the allowed principal reads it, and the open store serves everyone.
    found = await _a2m(client, "/a2m/payroll", HR_KEY, "memory/recall", {"query": "deploy"})
    assert found["result"]["records"]
    open_store = await _a2m(client, "/a2m/wiki", BOB_KEY, "memory/recall", {"query": "deploy"})
    assert open_store["result"]["records"]


async def test_a_federation_leaves_out_a_member_unnamed(client: httpx.AsyncClient) -> None:
    params = {"query": "deploy keys", "limit": 20}
    mine = await _a2m(client, "/a2m/everything", BOB_KEY, "memory/recall", params)
    assert mine["result"]["records"]
    assert "payroll" not in json.dumps(mine)
    described = await _a2m(client, "/a2m/everything", BOB_KEY, "memory/describe", {})
    assert [m["store"] for m in described["result"]["members"]] == ["wiki"]
    # Control: the HR principal's answer spans both members and names both.
    theirs = await _a2m(client, "/a2m/everything", HR_KEY, "memory/recall", params)
    assert len(theirs["result"]["records"]) > len(mine["result"]["records"])
    described = await _a2m(client, "/a2m/everything", HR_KEY, "memory/describe", {})
    assert [m["store"] for m in described["result"]["members"]] == ["payroll", "wiki"]


async def test_mcp_and_the_try_page_refuse_alike(client: httpx.AsyncClient) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "deploy"}, "_meta": META},
    }
    headers = {**_as(BOB_KEY), "accept": "application/json, text/event-stream"}
    refused = (await client.post("/mcp/payroll", json=call, headers=headers)).json()
    assert refused["result"]["isError"] is True
    text = refused["result"]["content"][0]["text"]
    assert "(A2M error -32005)" in text
    assert "payroll" not in text
    headers = {**_as(HR_KEY), "accept": "application/json, text/event-stream"}
    allowed = (await client.post("/mcp/payroll", json=call, headers=headers)).json()
    assert allowed["result"]["isError"] is False
    preview = await client.post("/try/preview/payroll", json={}, headers=_as(BOB_KEY))
    assert preview.json()["error"]["code"] == -32005
    preview = await client.post("/try/preview/payroll", json={}, headers=_as(HR_KEY))
    assert preview.json()["documents"]


async def test_discovery_lists_only_what_the_caller_may_use(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/.well-known/a2m-server.json", headers=_as(BOB_KEY))).json()
    assert doc["stores"] == {"wiki": "/a2m/wiki"}
    assert doc["federations"] == {"everything": "/a2m/everything"}
    assert "payroll" not in json.dumps(doc)
    theirs = (await client.get("/.well-known/a2m-server.json", headers=_as(HR_KEY))).json()
    assert set(theirs["stores"]) == {"payroll", "wiki"}
    refused = await client.get("/a2m/payroll/.well-known/a2m-server.json", headers=_as(BOB_KEY))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == -32005


async def test_the_all_stores_mcp_tools_name_only_usable_stores(
    client: httpx.AsyncClient,
) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}

    async def store_enum(key: str) -> list[str]:
        headers = {**_as(key), "accept": "application/json, text/event-stream"}
        tools = (await client.post("/mcp", json=listing, headers=headers)).json()["result"]
        search = next(t for t in tools["tools"] if t["name"] == "search")
        enum: list[str] = search["inputSchema"]["properties"]["store"]["enum"]
        assert "payroll" not in json.dumps(tools) or key == HR_KEY
        return enum

    assert await store_enum(BOB_KEY) == ["wiki", "everything"]
    assert await store_enum(HR_KEY) == ["wiki", "payroll", "everything"]


def test_allow_needs_values() -> None:
    from gateway.config import ConfigError

    with pytest.raises(ConfigError, match=r"allow.groups: list at least one non-empty value"):
        parse_config({"stores": {"s": _store({"groups": []})}})
