"""A small A2M 0.1 client written from the canonical text alone (dibenedetto/a2m-protocol,
spec/a2m-0.1.md), as a framework adapter would use it. It imports nothing from the gateway.

What it does, and where the text says so:

- calls memory/describe first and refuses locally what the server did not declare (§2);
- sends `limit: 0` for "everything" on timeline, as the reference client and its
  adapters do (§4.3, §4.4; docs/protocol.md);
- carries records as dicts and hands them back whole (§2: tolerate unknown fields);
- retries only what the server says is retryable — a -32603 whose `data.retryable` is
  true, after `data.retry_after_ms` — and never a deterministic refusal such as -32004
  READ_ONLY or -32003 (§7; docs/protocol.md);
- sends the A2M-Protocol-Version header on HTTP (§8.3.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PROTOCOL = "a2m/0.1"

INTERNAL_ERROR = -32603
CAPABILITY_NOT_SUPPORTED = -32003
READ_ONLY = -32004

Exchange = Callable[[dict[str, Any]], dict[str, Any]]
"""One JSON-RPC request object out, its response object back (the transport)."""


class A2MError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.data = data

    @property
    def retryable(self) -> bool:
        return (
            self.code == INTERNAL_ERROR
            and isinstance(self.data, dict)
            and self.data.get("retryable") is True
        )


@dataclass
class CanonicalClient:
    exchange: Exchange
    max_attempts: int = 3
    wait: Callable[[float], None] = field(default=lambda seconds: None)
    """How to wait retry_after_ms; tests record the waits instead of sleeping."""
    attempts: list[str] = field(default_factory=list)
    """Every request sent, by method: what a test checks for (no) retries."""
    profile: dict[str, Any] = field(default_factory=dict)
    _ids: int = 0

    def __post_init__(self) -> None:
        self.profile = self._call("memory/describe", {"protocol": PROTOCOL})

    def supports(self, capability: str) -> bool:
        return capability in self.profile.get("capabilities", [])

    def _require(self, capability: str) -> None:
        if not self.supports(capability):
            raise A2MError(CAPABILITY_NOT_SUPPORTED, f"not declared: {capability}")

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        for attempt in range(1, self.max_attempts + 1):
            self._ids += 1
            self.attempts.append(method)
            response = self.exchange(
                {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
            )
            if response.get("id") != self._ids:
                raise A2MError(INTERNAL_ERROR, "response id does not match the request")
            error = response.get("error")
            if error is None:
                return response.get("result")
            failure = A2MError(error["code"], error.get("message", ""), error.get("data"))
            if not failure.retryable or attempt == self.max_attempts:
                raise failure
            self.wait(float(failure.data.get("retry_after_ms", 1000)) / 1000.0)
        raise AssertionError("unreachable")

    def recall(self, query: str, limit: int = 5, **params: Any) -> dict[str, Any]:
        if "key_prefix" in params:
            self._require("keys")
        result: dict[str, Any] = self._call(
            "memory/recall", {**params, "query": query, "limit": limit}
        )
        return result

    def timeline(self, limit: int = 0, **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call("memory/timeline", {**params, "limit": limit})
        return result

    def fetch(self, key: str) -> dict[str, Any] | None:
        self._require("keys")
        record: dict[str, Any] | None = self._call("memory/fetch", {"key": key})["record"]
        return record

    def remember(self, content: str, **fields: Any) -> list[str]:
        ids: list[str] = self._call(
            "memory/remember", {"records": [{**fields, "content": content}]}
        )["ids"]
        return ids
