"""The soak's verdict on an answer (bench/soak/outcome.py) tells right errors from wrong ones.

The smoke test asserts that no answer was wrong; these prove the check can fail.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from bench.soak.outcome import classify


def _error(code: int, data: Any = None, message: str = "x") -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "error": error})


TROUBLE = {"reason": "engine_unavailable", "retryable": True, "retry_after_ms": 1000}


def test_a_result_is_ok() -> None:
    verdict = classify(200, b'{"jsonrpc":"2.0","id":1,"result":{"records":[]}}')
    assert (verdict.label, verdict.ok, verdict.canonical) == ("ok", True, True)


@pytest.mark.parametrize(
    ("body", "label"),
    [
        (_error(-32603, TROUBLE), "-32603 engine_unavailable"),
        (_error(-32603, {**TROUBLE, "reason": "deadline_exceeded"}), "-32603 deadline_exceeded"),
        (_error(-32001), "-32001"),
        (_error(-32602, {"retryable": False}), "-32602"),
        (_error(-32006, {"retry_after_ms": 500}), "-32006"),
    ],
)
def test_canonical_errors_pass(body: bytes, label: str) -> None:
    verdict = classify(200, body)
    assert (verdict.label, verdict.ok, verdict.canonical, verdict.leak) == (
        label,
        False,
        True,
        False,
    )


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (200, _error(-32603), "-32603 without a reason"),
        (200, _error(-32603, {**TROUBLE, "retryable": False}), "engine trouble not retryable"),
        (200, _error(-32603, {**TROUBLE, "retry_after_ms": None}), "engine trouble not retryable"),
        (200, _error(-32001, {"retryable": True}), "a caller's error marked retryable"),
        (200, _error(-32099), "code not in A2M 0.1's list"),
        (200, _error(-32006, {}), "quota without wait"),
        (500, b"internal error", "not a JSON-RPC body"),
        (200, b'{"jsonrpc":"2.0","id":1}', "neither result nor error"),
    ],
)
def test_wrong_answers_are_caught(status: int, body: bytes, why: str) -> None:
    verdict = classify(status, body)
    assert not verdict.ok
    assert not verdict.canonical
    assert verdict.why == why


@pytest.mark.parametrize("text", ["connect to 127.0.0.1:19200 failed", "see http://es:9200"])
def test_an_error_naming_a_host_is_a_leak(text: str) -> None:
    verdict = classify(200, _error(-32603, TROUBLE, message=text))
    assert verdict.canonical  # the code is right; the text is what leaks
    assert verdict.leak
