"""The JSON-RPC envelope and the exception-to-wire boundary (no engine involved)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from connectors.errors import EngineRejected, EngineTimeout, EngineUnavailable
from gateway.a2m.dispatcher import to_a2m_error as to_wire_error
from gateway.a2m.errors import A2MError, ErrorCode, InvalidParams
from gateway.a2m.jsonrpc import handle_message
from tests.support.spec import CANONICAL_CODES


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


def test_engine_trouble_is_a_retryable_internal_error() -> None:
    """docs/protocol.md: -32603 with data.reason / retryable / retry_after_ms."""
    unavailable = to_wire_error(EngineUnavailable(retry_after_ms=2500))
    assert int(unavailable.code) == -32603
    assert unavailable.data == {
        "reason": "engine_unavailable",
        "retryable": True,
        "retry_after_ms": 2500,
    }
    late = to_wire_error(EngineTimeout())
    assert late.code == -32603
    assert late.data == {"reason": "deadline_exceeded", "retryable": True, "retry_after_ms": 1000}
    # A deterministic refusal of the caller's query is its own fault, and not retryable.
    refused = to_wire_error(EngineRejected("x"))
    assert refused.code == -32602
    assert refused.data == {"retryable": False}
    err = InvalidParams("bad")
    assert to_wire_error(err) is err


def test_codes_are_exactly_the_canonical_list() -> None:
    assert {int(c): c.name for c in ErrorCode} == CANONICAL_CODES


def _subclasses(cls: type[A2MError]) -> list[type[A2MError]]:
    out: list[type[A2MError]] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def test_every_exception_carries_a_canonical_code() -> None:
    import gateway.a2m.errors as errors

    classes = _subclasses(errors.A2MError)
    assert len(classes) >= 15  # the whole tree, not an empty walk
    for cls in classes:
        # An ErrorCode member, not a bare int that happens to be canonical today.
        assert type(cls.code) is ErrorCode, cls


def test_exception_names_keep_their_meaning() -> None:
    """Other modules raise these by name; the name must mean the canonical code."""
    import gateway.a2m.errors as errors

    assert errors.ScopeDenied.code == -32005
    assert errors.QuotaExceeded.code == -32006
    assert errors.EmbeddingMismatch.code == -32008
    assert errors.UnknownTier.code == -32002
    assert errors.UnknownRecord.code == -32001
    assert errors.BackendUnavailable.code == errors.BackendTimeout.code == -32603


def _code_literals(source: str) -> list[int]:
    """Integer literals in the JSON-RPC error range (-32768..-32000) in code, not in prose."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int
            and 32000 <= node.operand.value <= 32768
        ):
            found.append(-node.operand.value)
    return found


def test_no_code_is_written_outside_the_errors_module() -> None:
    """A literal -320xx elsewhere in the package would bypass the one list (gateway/a2m/errors.py).

    Docstrings and comments may name codes; code must use ErrorCode.
    """
    from pathlib import Path

    assert _code_literals('"""answers -32006"""\nx = -32006  # -32602\n') == [-32006]
    root = Path(__file__).resolve().parents[2]
    sources = [*(root / "gateway").rglob("*.py"), *(root / "connectors").rglob("*.py")]
    assert len(sources) > 10
    offenders = [
        f"{p.relative_to(root)}: {code}"
        for p in sources
        if p != root / "gateway" / "a2m" / "errors.py"
        for code in _code_literals(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_envelope_knows_no_engine_errors() -> None:
    """One exception-to-wire mapping, in the dispatcher; the envelope imports none."""
    import ast
    import inspect

    import gateway.a2m.jsonrpc

    tree = ast.parse(inspect.getsource(gateway.a2m.jsonrpc))
    imported = {
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert "gateway.a2m.errors" in imported  # the walk sees the module's imports
    assert not {m for m in imported if m.startswith(("connectors", "gateway.embedders"))}


async def test_envelope_answers_a_connector_error_as_a_bare_internal_error() -> None:
    # Mapping engine trouble is the dispatcher's job; reaching the envelope unmapped is a bug.
    async def leaky(method: str, params: Any) -> Any:
        raise EngineUnavailable(retry_after_ms=5)

    out = await handle_message(b'{"jsonrpc":"2.0","id":1,"method":"m"}', leaky)
    assert out is not None
    assert orjson.loads(out)["error"] == {"code": -32603, "message": "Internal error"}
