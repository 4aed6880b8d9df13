"""The JSON-RPC envelope and the exception-to-wire boundary (no engine involved)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from connectors.errors import EngineRejected, EngineTimeout, EngineUnavailable
from gateway.errors import DOCUMENTED_CODES, ErrorCode, InvalidParams
from gateway.jsonrpc import handle_message, to_wire_error


async def echo(method: str, params: Any) -> Any:
    return {"method": method, "params": params}


async def call(raw: bytes | str) -> dict[str, Any]:
    out = await handle_message(raw, echo)
    assert out is not None
    body: dict[str, Any] = orjson.loads(out)
    return body


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", -32700),
        (b"", -32700),
        (b'{"jsonrpc":"2.0","id":1,"method":"x"} trailing', -32700),
        (b"\xff\xfe", -32700),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":NaN}}', -32700),
        (b"[]", -32600),
        (b'[{"jsonrpc":"2.0","id":1,"method":"memory/describe"}]', -32600),
        (b'"memory/describe"', -32600),
        (b"42", -32600),
        (b"null", -32600),
        (b'{"id":1,"method":"memory/describe"}', -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"memory/describe"}', -32600),
        (b'{"jsonrpc":"2.0","id":1}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"m"}', -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}', -32600),
    ],
)
async def test_envelope_errors(raw: bytes, code: int) -> None:
    body = await call(raw)
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["code"] == code
    assert "result" not in body


async def test_parse_error_has_null_id() -> None:
    assert (await call(b"{oops"))["id"] is None


@pytest.mark.parametrize("rid", [1, "abc", 0, -5, 2**53, 1.5, None])
async def test_id_is_echoed(rid: Any) -> None:
    body = await call(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "m", "params": {}}))
    assert body["id"] == rid
    assert body["result"] == {"method": "m", "params": {}}


async def test_id_echoed_on_invalid_request_when_readable() -> None:
    body = await call(b'{"jsonrpc":"2.0","id":"k","method":5}')
    assert body["id"] == "k"


async def test_positional_params_reach_the_dispatcher() -> None:
    body = await call(b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}')
    assert body["result"] == {"method": "m", "params": [1, 2]}


async def test_notification_gets_no_response() -> None:
    calls: list[str] = []

    async def record(method: str, params: Any) -> Any:
        calls.append(method)
        return {}

    assert await handle_message(b'{"jsonrpc":"2.0","method":"memory/recall"}', record) is None
    assert calls == []


async def test_unexpected_exception_becomes_bare_internal_error() -> None:
    async def boom(method: str, params: Any) -> Any:
        raise RuntimeError("connect to 10.0.0.7:9200 with password hunter2 failed")

    out = await handle_message(b'{"jsonrpc":"2.0","id":1,"method":"m"}', boom)
    assert out is not None
    assert b"10.0.0.7" not in out
    assert b"hunter2" not in out
    assert b"Traceback" not in out
    assert orjson.loads(out)["error"] == {"code": -32603, "message": "Internal error"}


def test_connector_errors_map_to_backend_codes() -> None:
    unavailable = to_wire_error(EngineUnavailable(retry_after_ms=2500))
    assert unavailable.code == ErrorCode.BACKEND_UNAVAILABLE
    assert unavailable.data == {"retry_after_ms": 2500}
    assert to_wire_error(EngineTimeout()).code == ErrorCode.BACKEND_TIMEOUT
    assert to_wire_error(EngineRejected("x")).code == ErrorCode.INTERNAL_ERROR
    err = InvalidParams("bad")
    assert to_wire_error(err) is err


def test_documented_codes_match_decisions() -> None:
    assert {-32700, -32600, -32601, -32602, -32603} <= DOCUMENTED_CODES
    assert {-32001, -32002, -32003, -32004, -32005, -32006, -32007} <= DOCUMENTED_CODES
    assert {-32050, -32051} <= DOCUMENTED_CODES
