"""The wire schema itself: valid, and able to fail (each check would catch its drift)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.wire import assert_response, problems

RECORD = {"id": "r1", "content": "c", "created_at": "2026-01-02T03:04:05.000Z"}


def ok(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def err(error: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "error": error}


def test_canonical_shapes_pass() -> None:
    assert_response(ok({"records": [{**RECORD, "score": 0.5}]}), "memory/recall")
    assert_response(
        ok({"records": [RECORD], "prompt": "- c", "prompt_ids": ["r1"]}), "memory/timeline"
    )
    assert_response(ok({"record": None}), "memory/fetch")
    assert_response(
        ok(
            {
                "protocol": "a2m/0.1",
                "name": "s",
                "capabilities": ["core", "prompt"],
                "methods": ["memory/describe"],
                "prompt": {"styles": ["auto", "facts"], "methods": ["template", "none"]},
            }
        ),
        "memory/describe",
    )
    data = {"reason": "engine_unavailable", "retryable": True, "retry_after_ms": 1000}
    assert_response(err({"code": -32603, "message": "x", "data": data}))
    assert_response(err({"code": -32006, "message": "x", "data": {"retry_after_ms": 5}}))
    # Final failures name their reason and say they are not retryable (docs/protocol.md).
    final = {"reason": "query_too_large", "retryable": False}
    assert_response(err({"code": -32602, "message": "x", "data": final}))
    assert_response(err({"code": -32603, "message": "x", "data": {**final, "reason": "x"}}))


@pytest.mark.parametrize(
    ("definition", "instance"),
    [
        ("error", {"code": -32050, "message": "backend unavailable"}),
        ("error", {"code": -32051, "message": "timeout"}),
        ("error", {"code": -32005, "message": "x", "data": {"reason": "engine_unavailable"}}),
        ("error", {"code": -32603, "message": "x", "data": {"reason": "engine_unavailable"}}),
        ("error", {"code": -32006, "message": "rate"}),
        ("error", {"code": -32602, "message": "x", "data": {"reason": "query_too_large"}}),
        ("error", {"code": -32602, "message": "x", "data": {"reason": "r", "retryable": True}}),
        (
            "error",
            {"code": -32602, "message": "x", "data": {"reason": "overloaded", "retryable": False}},
        ),
        ("record", {"id": "r1", "content": "c"}),
        ("record", {"id": "r1", "created_at": "2026-01-02T03:04:05.000Z"}),
        ("record", {**RECORD, "created_at": 1767323045000}),
        ("record", {**RECORD, "created_at": "2026-01-02T03:04:05+00:00"}),
        ("recallResult", {"records": [RECORD]}),
        ("timelineResult", {"records": [{**RECORD, "score": 0.1}]}),
        ("timelineResult", {"records": [], "prompt": ""}),
        ("timelineResult", {"records": [], "extra": 1}),
        ("fetchResult", {}),
        ("describeResult", {"protocol": "a2m/0.1", "name": "s", "capabilities": [], "methods": []}),
        (
            "describeResult",
            {"protocol": "a2m/0.1", "name": "s", "capabilities": ["core", "prompt"], "methods": []},
        ),
        (
            "describeResult",
            {
                "protocol": "a2m/0.1",
                "name": "s",
                "capabilities": ["core", "prompt"],
                "methods": [],
                "prompt": {"styles": ["list", "cited"], "methods": ["template"]},
            },
        ),
        (
            "response",
            {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": -32603, "message": "x"}},
        ),
    ],
)
def test_each_drift_is_caught(definition: str, instance: Any) -> None:
    assert problems(definition, instance)
