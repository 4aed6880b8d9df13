"""The MCP door on a real uvicorn socket: what is learnt without a credential, and what its
refusals say (the door's own fixed messages, never the SDK's, its parser's or pydantic's).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from gateway.a2m.errors import ErrorCode
from tests.security.edge_support import served
from tests.security.support import BOB_KEY, ISSUER, Issuer, auth_section, bearer

PRM = "/.well-known/oauth-protected-resource"
TOOLS_LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
SERVED = ["docs", "both"]  # a store and a federation
UNSERVED = ["ghost", "nope-2"]


@asynccontextmanager
async def mcp_gateway(issuer: Issuer) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """Stores docs and other, federation both, with server.auth: (a client, its base URL)."""
    federations = {"both": {"members": ["docs", "other"]}}
    server = {"auth": auth_section(issuer)}
    async with (
        served(server, stores=("docs", "other"), federations=federations) as (port, _),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as http,
    ):
        yield http, f"http://127.0.0.1:{port}"


def without(name: str, text: str) -> str:
    """`text` with every mention of `name` replaced: what the answer says of anything else."""
    return text.replace(name, "<name>")


async def anonymous_answers(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    """Everything a caller without a credential gets for `name`, the name itself blanked."""
    meta = await http.get(f"{PRM}/mcp/{name}")
    call = await http.post(f"/mcp/{name}", content=TOOLS_LIST, headers=MCP_HEADERS)
    return {
        "metadata": (meta.status_code, without(name, meta.text)),
        "call": (
            call.status_code,
            without(name, call.headers.get("www-authenticate", "")),
            without(name, call.text),
        ),
    }


async def test_store_names_cannot_be_probed_without_a_credential(issuer: Issuer) -> None:
    async with mcp_gateway(issuer) as (http, _):
        answers = {name: await anonymous_answers(http, name) for name in SERVED + UNSERVED}
        first = answers["docs"]
        assert first["metadata"][0] == 200
        assert first["call"][0] == 401
        for name, answer in answers.items():
            assert answer == first, name
        # With a credential, what exists is told apart.
        for name, status in [("docs", 200), ("both", 200), ("ghost", 404)]:
            r = await http.post(
                f"/mcp/{name}", content=TOOLS_LIST, headers={**MCP_HEADERS, **bearer(BOB_KEY)}
            )
            assert r.status_code == status, (name, r.text)


async def test_discovery_still_leads_a_client_to_a_served_store(issuer: Issuer) -> None:
    async with mcp_gateway(issuer) as (http, base):
        for path in ("/mcp", "/mcp/docs", "/mcp/both"):
            r = await http.post(path, content=TOOLS_LIST, headers=MCP_HEADERS)
            assert r.status_code == 401
            challenge = r.headers["www-authenticate"]
            url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
            assert url == f"{base}{PRM}{path}"
            doc = (await http.get(url)).json()
            assert doc["resource"] == f"{base}{path}"
            assert doc["authorization_servers"] == [ISSUER]


async def test_a_name_that_cannot_be_a_store_is_answered_alike_served_or_not(
    issuer: Issuer,
) -> None:
    # Nothing but a well-formed store name is echoed: such a path is /mcp's resource, and
    # has no metadata of its own.
    async with mcp_gateway(issuer) as (http, base):
        for name in ('no"such', "UPPER", "a" * 64):
            meta = await http.get(f"{PRM}/mcp/{name}")
            assert meta.status_code == 404, name
            r = await http.post(f"/mcp/{name}", content=TOOLS_LIST, headers=MCP_HEADERS)
            assert r.status_code == 401
            assert f'resource_metadata="{base}{PRM}/mcp"' in r.headers["www-authenticate"]


NOT_ONE_MESSAGE = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {
        "code": ErrorCode.INVALID_REQUEST,
        "message": "Invalid request: not one JSON-RPC 2.0 message object",
    },
}
PARSE_ERROR = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {
        "code": ErrorCode.PARSE_ERROR,
        "message": "Parse error: the message is not valid JSON",
    },
}
MARKER = "echo-marker-7f3a"
DEEP = "[" * 500 + "]" * 500


RESPONSE = f'{{"jsonrpc":"2.0","id":1,"result":"{MARKER}"}}'
ERROR_RESPONSE = f'{{"jsonrpc":"2.0","id":1,"error":{{"code":"{MARKER}","message":"m"}}}}'


@pytest.mark.parametrize(
    ("version", "body", "expected"),
    [
        # Posted responses reach the SDK, whose two revisions refuse them differently.
        ("2025-11-25", RESPONSE, NOT_ONE_MESSAGE),
        ("2026-07-28", RESPONSE, NOT_ONE_MESSAGE),
        ("2025-11-25", ERROR_RESPONSE, NOT_ONE_MESSAGE),
        ("2026-07-28", ERROR_RESPONSE, NOT_ONE_MESSAGE),
        # Deeper than the 2025-11-25 SDK parser nests, not than the door's.
        (
            "2025-11-25",
            '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":' + DEEP + "}}",
            PARSE_ERROR,
        ),
        ("2025-11-25", DEEP, NOT_ONE_MESSAGE),
    ],
    ids=[
        "response",
        "response 2026",
        "error response",
        "error response 2026",
        "deep params",
        "deep body",
    ],
)
async def test_the_mcp_door_refuses_in_its_own_words(
    issuer: Issuer, version: str, body: str, expected: dict[str, Any]
) -> None:
    async with mcp_gateway(issuer) as (http, _):
        headers = {**MCP_HEADERS, **bearer(BOB_KEY), "mcp-protocol-version": version}
        r = await http.post("/mcp", content=body.encode(), headers=headers)
        assert r.status_code == 400
        assert r.json() == expected
        for leak in (MARKER, "pydantic", "validation", "recursion", "line 1"):
            assert leak not in r.text.lower()


async def test_what_the_sdk_accepts_is_still_accepted(issuer: Issuer) -> None:
    async with mcp_gateway(issuer) as (http, _):
        headers = {**MCP_HEADERS, **bearer(BOB_KEY), "mcp-protocol-version": "2025-11-25"}
        listed = await http.post("/mcp", content=TOOLS_LIST, headers=headers)
        assert listed.status_code == 200
        assert {t["name"] for t in listed.json()["result"]["tools"]} == {
            "search",
            "fetch",
            "timeline",
        }
        # A well-formed response object is acknowledged as before (the stateless server
        # asked nothing, so it is dropped), and a notification too.
        for message in (
            {"jsonrpc": "2.0", "id": 1, "result": {}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ):
            r = await http.post("/mcp", content=json.dumps(message).encode(), headers=headers)
            assert r.status_code == 202, (message, r.text)
