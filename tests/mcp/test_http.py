"""The SDK's own client against a real `a2m-gateway serve`, on every backend, both revisions.

Ground truth is the same server's A2M endpoint: MCP `search` must return
exactly the records `memory/recall` returns, `fetch` the full content, and
`timeline` what `memory/timeline` does, since both doors share one path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.a2m.errors import ErrorCode
from tests.conformance.conftest import (
    HttpClient,
    HttpServer,
    StoreBackend,
    start_http_server,
)
from tests.mcp.support import (
    MODES,
    TOOLS,
    error_text,
    mcp_http,
    structured,
    text,
    tools_by_name,
)

pytestmark = pytest.mark.integration

QUERY = "retry backoff deadline engine"


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


def negotiated(mode: str) -> str:
    return "2025-11-25" if mode == "legacy" else mode


async def test_lists_exactly_the_three_read_only_tools(
    http_server: HttpServer, http_client: HttpClient, mode: str
) -> None:
    async with mcp_http(f"{http_server.base_url}/mcp", mode) as client:
        assert client.protocol_version == negotiated(mode)
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
    search = tools_by_name(tools)["search"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["store"]["enum"] == ["demo"]
    # `where` lists the fields the mapping exposes, each one a field the records really carry.
    where = search["properties"]["where"]["properties"]
    records = http_client.call("memory/timeline", {"limit": 100})["records"]
    carried = {k for r in records for k in r} | {k for r in records for k in r.get("metadata", {})}
    assert "id" in where
    assert set(where) <= carried, set(where) - carried
    # The demo is unscoped, so example values were learnt from its records.
    examples = [v for prop in where.values() for v in prop.get("examples", [])]
    assert examples
    values = {str(v) for r in records for v in [*r.values(), *r.get("metadata", {}).values()]}
    assert {str(e) for e in examples} <= values


async def test_search_fetch_timeline_agree_with_a2m(
    http_server: HttpServer, http_client: HttpClient, mode: str
) -> None:
    recall = http_client.call("memory/recall", {"query": QUERY, "limit": 5})["records"]
    newest = http_client.call("memory/timeline", {"limit": 4})["records"]
    assert recall
    assert newest
    async with mcp_http(f"{http_server.base_url}/mcp", mode) as client:
        tools = tools_by_name((await client.list_tools()).tools)
        found = await client.call_tool("search", {"query": QUERY, "limit": 5})
        listing = structured(found, tools["search"])
        top = listing["results"][0]
        fetched = structured(await client.call_tool("fetch", {"id": top["id"]}), tools["fetch"])
        timeline = structured(await client.call_tool("timeline", {"limit": 4}), tools["timeline"])
        by_key = None
        if recall[0].get("key"):
            by_key = await client.call_tool("fetch", {"id": recall[0]["key"], "store": "demo"})
            by_key_doc = structured(by_key, tools["fetch"])
    assert [r["id"] for r in listing["results"]] == [f"demo:{r['id']}" for r in recall]
    # The same ranking and scores, up to the last bits: the first search of a Qdrant
    # local-mode collection can score a few ulps away from the searches after it (3e-11
    # seen on the demo, vectors identical), and the search and recall here are two calls.
    assert [r["score"] for r in listing["results"]] == pytest.approx(
        [r["score"] for r in recall], rel=1e-9
    )
    assert [r["cite"] for r in listing["results"]] == [f"[{i}]" for i in range(1, 6)]
    assert listing["truncated"] is False
    assert listing["omitted"] == 0
    if recall[0].get("uri"):
        assert top["url"] == recall[0]["uri"]
    rendered = text(found)
    assert rendered.startswith("[1] ")
    assert "[5] " in rendered
    assert top["title"] in rendered
    assert fetched["text"] == recall[0]["content"]
    assert fetched["id"] == top["id"]
    assert fetched["truncated"] is False
    assert [r["id"] for r in timeline["results"]] == [f"demo:{r['id']}" for r in newest]
    stamps = [r["created_at"] for r in timeline["results"]]
    assert stamps == sorted(stamps)
    if by_key is not None:
        assert by_key_doc["text"] == recall[0]["content"]


async def test_the_store_endpoint_has_no_store_argument(
    http_server: HttpServer, http_client: HttpClient, mode: str
) -> None:
    recall = http_client.call("memory/recall", {"query": QUERY, "limit": 3})["records"]
    async with mcp_http(f"{http_server.base_url}/mcp/demo", mode) as client:
        tools = tools_by_name((await client.list_tools()).tools)
        assert tools
        assert all("store" not in t.input_schema["properties"] for t in tools.values())
        listing = structured(
            await client.call_tool("search", {"query": QUERY, "limit": 3}), tools["search"]
        )
        doc = structured(
            await client.call_tool("fetch", {"id": listing["results"][1]["id"]}), tools["fetch"]
        )
    assert [r["id"] for r in listing["results"]] == [r["id"] for r in recall]
    assert doc["text"] == recall[1]["content"]


BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {}),
    ("search", {"query": ""}),
    ("search", {"query": 5}),
    ("search", {"query": "x", "limit": 0}),
    ("search", {"query": "x", "limit": "5"}),
    ("search", {"query": "x", "limit": 10**9}),
    ("search", {"query": "x", "where": "group"}),
    ("search", {"query": "x", "where": {"group": []}}),
    ("search", {"query": "x", "where": {"embedding": 1}}),
    ("search", {"query": "x", "where": {"group": {"$ne": 1}}}),
    ("search", {"query": "x", "store": "nope"}),
    ("search", {"query": "x", "bogus": True}),
    ("search", {"query": "word " * 2000}),
    ("fetch", {}),
    ("fetch", {"id": ""}),
    ("fetch", {"id": ["a"]}),
    ("fetch", {"id": "no-such-record-7f3a"}),
    ("fetch", {"id": "nope:1"}),
    ("timeline", {"limit": -1}),
    ("timeline", {"key_prefix": 3}),
    ("remember", {"content": "x"}),
    ("forget", {"id": "1"}),
]


async def test_bad_arguments_are_tool_errors(http_server: HttpServer, mode: str) -> None:
    async with mcp_http(f"{http_server.base_url}/mcp", mode) as client:
        for name, args in BAD_CALLS:
            result = await client.call_tool(name, args)
            message = error_text(result)
            assert message, (name, args)
            assert "127.0.0.1" not in message, message
            assert "http://" not in message, message


async def test_bad_http_never_answers_5xx(http_server: HttpServer) -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    bodies = [
        b"{not json",
        b"[]",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":[1]}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}',
        b'{"jsonrpc":"2.0","id":1,"method":"resources/list"}',
        b"\xff\xfe",
    ]
    async with httpx.AsyncClient(base_url=http_server.base_url, timeout=30) as http:
        for body in bodies:
            for version in ("2025-11-25", "2026-07-28"):
                r = await http.post(
                    "/mcp", content=body, headers={**headers, "mcp-protocol-version": version}
                )
                assert r.status_code < 500, (body, version, r.status_code, r.text[:200])
                assert "Traceback" not in r.text
        assert (await http.post("/mcp/nope", content=b"{}", headers=headers)).status_code == 404
        assert (await http.get("/mcp", headers={"accept": "text/event-stream"})).status_code < 500
        # No OAuth metadata when the server has no authentication to describe.
        prm = await http.get("/.well-known/oauth-protected-resource/mcp")
        assert prm.status_code == 404


async def test_results_fit_the_character_budget(
    tmp_path: Path, backend: StoreBackend, mode: str
) -> None:
    if backend.name != "qdrant":
        pytest.skip("one backend is enough for the budget (it is applied after the store)")
    config = backend.write_config(
        tmp_path / "gateway.yaml",
        tmp_path,
        mcp={"max_output_chars": 1500, "snippet_chars": 200},
    )
    server = start_http_server(tmp_path / "data", config)
    try:
        async with mcp_http(f"{server.base_url}/mcp", mode) as client:
            tools = tools_by_name((await client.list_tools()).tools)
            found = await client.call_tool("search", {"query": QUERY, "limit": 50})
            listing = structured(found, tools["search"])
            doc_id = listing["results"][0]["id"]
            long_doc = structured(await client.call_tool("fetch", {"id": doc_id}), tools["fetch"])
    finally:
        server.stop()
    assert listing["truncated"] is True
    assert listing["omitted"] > 0
    assert 1 <= len(listing["results"]) < 50
    assert len(text(found)) <= 1500
    assert f"{listing['omitted']} more results omitted" in text(found)
    assert all(len(r["snippet"]) <= 200 for r in listing["results"])
    assert len(text(found)) <= 1500
    # The fetched document is within budget too (cut and marked if it had to be).
    assert len(long_doc["text"]) <= 1500


def _recall_count(metrics: str, code: int) -> float:
    line = f'a2m_requests_total{{code="{code}",method="memory/recall",store="demo"}}'
    found = [ln for ln in metrics.splitlines() if ln.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


async def test_mcp_calls_are_a2m_calls_in_the_metrics(http_server: HttpServer, mode: str) -> None:
    """One door, one path: each MCP search is one memory/recall in the store's metrics."""
    async with httpx.AsyncClient(base_url=http_server.base_url, timeout=30) as http:
        before = (await http.get("/metrics")).text
        async with mcp_http(f"{http_server.base_url}/mcp", mode) as client:
            for _ in range(3):
                assert not (await client.call_tool("search", {"query": QUERY})).is_error
            # Past max_query_length: refused by the A2M call (a bad limit never gets that far).
            assert (await client.call_tool("search", {"query": "memory " * 1000})).is_error
        after = (await http.get("/metrics")).text
    assert _recall_count(after, 0) - _recall_count(before, 0) == 3
    invalid = int(ErrorCode.INVALID_PARAMS)
    assert _recall_count(after, invalid) - _recall_count(before, invalid) == 1
