"""A 2026-07-28 tool call answered in one step says exactly what the MCP SDK would.

Every request below goes to the gateway's HTTP app twice: as served, and with
the one-step path declining everything, so the SDK's own entry answers. Status,
content type and the decoded body must agree, for calls that succeed, calls
whose tool fails, and requests the SDK refuses (which the one-step path must
leave to it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.demo import default_demo_config
from gateway.mcp.single_call import SingleCall
from gateway.runtime import Gateway
from tests.support.asgi import app_client, http_app

Answer = tuple[int, str, Any]
"""Status, content type and decoded body."""
VERSION = "2026-07-28"
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": VERSION,
    "mcp-method": "tools/call",
    "mcp-name": "search",
}
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(arguments: Any = None, *, name: str = "search", rid: Any = 1, **extra: Any) -> Any:
    params: dict[str, Any] = {"name": name, "_meta": dict(META)}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params, **extra}


def with_params(body: Any, **params: Any) -> Any:
    body["params"].update(params)
    return body


CASES: dict[str, tuple[Any, dict[str, str] | list[tuple[str, str]]]] = {
    "a search": (call({"query": "how are scores normalised?"}), {}),
    "a search with a limit and a string id": (call({"query": "scores", "limit": 2}, rid="a"), {}),
    "a search answering nothing": (call({"query": "zzzqqqxxx"}, rid=0), {}),
    "non-ASCII text": (call({"query": "café ünïcode “quotes” 記憶"}), {}),
    "a timeline": (call({"limit": 3}, name="timeline"), {"mcp-name": "timeline"}),
    "a fetch of no such id": (call({"id": "nope"}, name="fetch"), {"mcp-name": "fetch"}),
    "arguments the tool refuses": (call({"query": 5}), {}),
    "a limit over the store's maximum": (call({"query": "x", "limit": 100_000}), {}),
    "no arguments": (call(), {}),
    "an unknown tool": (call({}, name="write"), {"mcp-name": "write"}),
    "a traceparent in _meta": (
        with_params(
            call({"query": "scores"}),
            _meta={
                **META,
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            },
        ),
        {},
    ),
    "an extra member in params": (with_params(call({"query": "x"}), cursor="c"), {}),
    "a big integer id": (call({"query": "x"}, rid=2**53), {}),
    "arguments not an object": (call(["query"]), {}),
    "a name that is not a string": (with_params(call({}), name=7), {}),
    "no _meta": (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search"}},
        {},
    ),
    "_meta without capabilities": (
        with_params(
            call({"query": "x"}), _meta={"io.modelcontextprotocol/protocolVersion": VERSION}
        ),
        {},
    ),
    "a version header the envelope does not name": (
        call({"query": "x"}),
        {"mcp-protocol-version": "2099-01-01"},
    ),
    "an envelope naming another version than the header": (
        with_params(
            call({"query": "x"}),
            _meta={**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"},
        ),
        {},
    ),
    "a charset on the content type": (
        call({"query": "scores"}),
        {"content-type": "application/json; charset=utf-8"},
    ),
    "a +json content type": (call({"query": "scores"}), {"content-type": "application/x+json"}),
    "an Mcp-Param header": (call({"query": "scores"}), {"mcp-param-query": "scores"}),
    "no Mcp-Method header": (call({"query": "x"}), {"mcp-method": ""}),
    "an Mcp-Name header naming another tool": (call({"query": "x"}), {"mcp-name": "fetch"}),
    "Accept without JSON": (call({"query": "x"}), {"accept": "text/event-stream"}),
    "a wildcard Accept": (call({"query": "x"}), {"accept": "*/*"}),
    "Accept with a quality on JSON": (call({"query": "x"}), {"accept": "Application/JSON;q=0.5"}),
    "Accept naming only other types": (call({"query": "x"}), {"accept": "text/html, image/*"}),
    "a second Mcp-Name header": (call({"query": "x"}), [("mcp-name", "search")]),
    "a second, different Mcp-Method header": (call({"query": "x"}), [("Mcp-Method", "tools/list")]),
    "a second Accept header, without JSON": (call({"query": "x"}), [("accept", "text/html")]),
    "a notification": (
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "search"}},
        {},
    ),
    "an id that is an object": (call({"query": "x"}, rid={"a": 1}), {}),
    "params that are a list": (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []},
        {},
    ),
}


@pytest.fixture(scope="module")
async def demo() -> AsyncIterator[httpx.AsyncClient]:
    """A client of the demo's HTTP app, its lifespan entered (leaving it closes the stores)."""
    gateway = Gateway(default_demo_config(hybrid=False))
    await gateway.open_local_stores()
    app = http_app(gateway)
    async with app.router.lifespan_context(app), app_client(app) as client:
        yield client


async def _answer(
    client: httpx.AsyncClient, body: Any, headers: dict[str, str] | list[tuple[str, str]]
) -> Answer:
    """`headers`: a dict replaces (an empty value drops) those of HEADERS; pairs are sent
    after HEADERS, repeating a name."""
    sent: list[tuple[str, str]]
    if isinstance(headers, dict):
        sent = [(k, v) for k, v in {**HEADERS, **headers}.items() if v]
    else:
        sent = [*HEADERS.items(), *headers]
    response = await client.post("/mcp/demo", content=orjson.dumps(body), headers=sent)
    json = response.headers.get("content-type", "").startswith("application/json")
    decoded = orjson.loads(response.content) if json and response.content else response.text
    return response.status_code, response.headers.get("content-type", ""), decoded


@pytest.mark.parametrize("case", list(CASES))
async def test_the_answer_is_the_sdks(
    demo: httpx.AsyncClient, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, headers = CASES[case]
    served = await _answer(demo, body, headers)
    with monkeypatch.context() as patch:
        patch.setattr(SingleCall, "accepts", lambda *args: None)
        sdk = await _answer(demo, body, headers)
    assert served == sdk


async def test_a_well_formed_call_is_answered_in_one_step(
    demo: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison above is not of the SDK with itself: the calls do take the one step."""
    served: list[str] = []
    serve = SingleCall.serve

    async def counted(self: SingleCall, version: str, *args: Any) -> None:
        served.append(version)
        await serve(self, version, *args)

    monkeypatch.setattr(SingleCall, "serve", counted)
    status, _, body = await _answer(demo, call({"query": "scores"}), {})
    assert status == 200
    assert body["result"]["structuredContent"]["results"]
    assert served == [VERSION]
    await _answer(demo, call({"query": "x"}), {"mcp-name": "fetch"})
    assert served == [VERSION]  # a refused request is the SDK's to answer
