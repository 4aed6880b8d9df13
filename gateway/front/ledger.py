"""The ledger: the one step that charges a caller's rate limit and writes the audit line.

A transport charges each request once, before it reads the body (HTTP) or
dispatches it (in process), through :meth:`Ledger.charge`; a refusal is audited
there. The dispatcher records every call it answered through :meth:`Ledger.record`.
Nothing else takes a token or writes an ``a2m.audit`` call line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gateway.a2m.errors import QuotaExceeded
from gateway.security.ratelimit import CallQuota
from gateway.security.scopes import Caller

audit = logging.getLogger("a2m.audit")

MAX_AUDITED_QUERY = 4096

Observer = Callable[[str, str, int, float], None]
"""(store, method, code (0 = ok), seconds): the metrics module registers one."""


class Ledger:
    """One per gateway: a principal's quota is per gateway, not per store."""

    def __init__(self, limiter: CallQuota | None = None, *, log_queries: bool = False) -> None:
        self.limiter = limiter
        self.log_queries = log_queries

    async def charge(self, caller: Caller, store: str) -> QuotaExceeded | None:
        """Take one token from the caller's bucket; the refusal (audited) when it is empty."""
        limiter = self.limiter
        key = caller.rate_key
        if limiter is None or key is None:
            return None
        wait_ms = await limiter.acquire(key)
        if wait_ms is None:
            return None
        err = QuotaExceeded("Rate limit exceeded for this caller", data={"retry_after_ms": wait_ms})
        audit.info(
            "call",
            extra={
                "store": store,
                "method": None,
                "principal": caller.label[:300],
                "code": int(err.code),
                **({"client": caller.client} if caller.client is not None else {}),
            },
        )
        return err

    def record(
        self,
        store: str,
        method: str,
        caller: Caller,
        code: int,
        results: int | None,
        elapsed: float,
        params: Any,
    ) -> None:
        """The audit line of one answered call."""
        extra: dict[str, Any] = {
            "store": store,
            "method": method[:64],
            "principal": caller.label[:300],
            "code": code,
            "results": results,
            "latency_ms": round(elapsed * 1000, 3),
        }
        if caller.client is not None:
            extra["client"] = caller.client
        if self.log_queries and isinstance(params, dict):
            query = params.get("query")
            if isinstance(query, str):
                extra["query"] = query[:MAX_AUDITED_QUERY]
        audit.info("call", extra=extra)
