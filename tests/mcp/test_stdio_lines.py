"""`a2m-gateway mcp` answers what is piped into it, as `a2m-gateway stdio` does.

Real processes on the lexical demo (in memory, no engine): a one-shot stateless
2026-07-28 request gets its result before the process ends, a line that is not
JSON gets a parse error, and the SDK's own client still holds a whole session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.mcp.support import mcp_stdio, stdio_params, structured, tools_by_name

DEMO = str(Path(__file__).resolve().parents[2] / "config" / "demo.yaml")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _piped(lines: list[str]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "mcp", "--config", DEMO],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_piped_stateless_request_gets_its_answer() -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "search",
            "arguments": {"query": "read-only", "limit": 2},
            "_meta": META,
        },
    }
    listing = {"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"_meta": META}}
    answers = {a["id"]: a for a in _piped([json.dumps(call), json.dumps(listing)])}
    assert set(answers) == {7, 8}
    assert "error" not in answers[7], answers[7]
    assert len(answers[7]["result"]["structuredContent"]["results"]) == 2
    assert {t["name"] for t in answers[8]["result"]["tools"]} >= {"search", "fetch"}


def test_garbage_gets_a_parse_error_and_the_next_line_is_served() -> None:
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": META}}
    answers = _piped(["this is not json", "[1, 2]", json.dumps(listing)])
    assert answers[0] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: the line is not valid JSON"},
    }
    assert answers[1]["error"]["code"] == -32600
    assert answers[1]["id"] is None
    assert answers[2]["id"] == 3
    assert "result" in answers[2]


def test_nothing_piped_ends_quietly() -> None:
    assert _piped([]) == []


async def test_the_sdk_client_still_holds_a_session(tmp_path: Path) -> None:
    params = stdio_params(tmp_path, ["--config", DEMO])
    async with mcp_stdio(params, "legacy") as client:
        tools = tools_by_name((await client.list_tools()).tools)
        found = await client.call_tool("search", {"query": "read-only", "limit": 2})
        assert len(structured(found, tools["search"])["results"]) == 2
