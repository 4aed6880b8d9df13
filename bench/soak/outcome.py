"""What one gateway answer was, and whether it was a correct one under faults.

A correct error (docs/protocol.md) has a code from A2M 0.1's closed list;
engine trouble is -32603 with ``data.reason`` one of the EngineTrouble values,
``data.retryable: true`` and a ``retry_after_ms``; a caller's error is never
marked retryable; no error text names a host. Anything else (an HTTP 500, a
body that is not JSON-RPC, a -32603 without a reason) is counted as wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.a2m.errors import DOCUMENTED_CODES, EngineTrouble, ErrorCode

_TROUBLE = frozenset(r.value for r in EngineTrouble)
_LEAKS = (b"127.0.0.1", b"localhost", b"Traceback", b"http://")

OK = "ok"
HANG = "hang"
GATEWAY_UNREACHABLE = "gateway-unreachable"


@dataclass(frozen=True, slots=True)
class Verdict:
    label: str
    """"ok", "hang", "-32603 engine_unavailable", "-32001", "http 500", ..."""
    ok: bool = False
    canonical: bool = True
    """A code from the closed list, with data.retryable as the code requires."""
    leak: bool = False
    """The error's text names a host, a URL or a stack trace."""
    why: str = ""
    """For a wrong answer: what is wrong with it."""


HUNG = Verdict(HANG, canonical=False, why="no answer by the deadline + 1 s")
UNREACHABLE = Verdict(GATEWAY_UNREACHABLE, canonical=False, why="the gateway did not answer")


def _error_verdict(error: dict[str, Any], raw: bytes) -> Verdict:
    code = error.get("code")
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    reason = data.get("reason")
    retryable = data.get("retryable")
    label = f"{code} {reason}" if isinstance(reason, str) else str(code)
    leak = any(marker in raw for marker in _LEAKS)
    if not isinstance(code, int) or code not in DOCUMENTED_CODES:
        return Verdict(label, canonical=False, leak=leak, why="code not in A2M 0.1's list")
    if code == ErrorCode.INTERNAL_ERROR:
        if reason not in _TROUBLE:
            return Verdict(label, canonical=False, leak=leak, why="-32603 without a reason")
        wait = data.get("retry_after_ms")
        if retryable is not True or not isinstance(wait, int) or wait < 0:
            return Verdict(label, canonical=False, leak=leak, why="engine trouble not retryable")
        return Verdict(label, leak=leak)
    if code == ErrorCode.QUOTA_EXCEEDED:
        ok = isinstance(data.get("retry_after_ms"), int) and retryable is not False
        return Verdict(label, canonical=ok, leak=leak, why="" if ok else "quota without wait")
    if retryable:
        return Verdict(label, canonical=False, leak=leak, why="a caller's error marked retryable")
    return Verdict(label, leak=leak)


def classify(status: int, raw: bytes) -> Verdict:
    """The verdict on one HTTP answer of the gateway to a JSON-RPC call."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        return Verdict(f"http {status}", canonical=False, why="not a JSON-RPC body")
    if "result" in body and status == 200:
        return Verdict(OK, ok=True)
    error = body.get("error")
    if not isinstance(error, dict):
        return Verdict(f"http {status}", canonical=False, why="neither result nor error")
    return _error_verdict(error, raw)
