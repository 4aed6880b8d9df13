"""A2M dispatcher: method name -> capability gate -> params model -> store."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from connectors.errors import (
    ConnectorError,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    QueryTooLarge,
)
from gateway.a2m.errors import (
    A2MError,
    BackendOverloaded,
    BackendTimeout,
    BackendUnavailable,
    CapabilityNotSupported,
    CircuitOpenError,
    InternalError,
    InvalidParams,
    MethodNotFound,
    QuotaExceeded,
    ReadOnly,
)
from gateway.a2m.methods import METHOD_CAPABILITY, WRITE_METHODS, Capability
from gateway.a2m.params import (
    DescribeParams,
    FetchParams,
    PreviewParams,
    RecallParams,
    TimelineParams,
    parse_params,
)
from gateway.embedders import EmbedderUnavailable
from gateway.observability.telemetry import active as active_tracing
from gateway.resilience import CircuitOpen, Overloaded
from gateway.security.ratelimit import CallQuota
from gateway.security.scopes import LOCAL, Caller
from gateway.store.profile import gate_method

log = logging.getLogger(__name__)
audit = logging.getLogger("a2m.audit")

Observer = Callable[[str, str, int, float], None]
"""(store, method, code (0 = ok), seconds): the metrics module registers one."""

MAX_AUDITED_QUERY = 4096


class ServedStore(Protocol):
    """What a dispatcher serves: a Store, or a Federation of stores."""

    @property
    def name(self) -> str: ...

    async def ensure_started(self) -> None: ...

    def declares(self, cap: Capability) -> bool: ...

    def describe(self, params: DescribeParams | None = ..., caller: Caller = ...) -> Any: ...

    async def recall(self, params: RecallParams, caller: Caller = ...) -> Any: ...

    async def timeline(self, params: TimelineParams, caller: Caller = ...) -> Any: ...

    async def fetch(self, params: FetchParams, caller: Caller = ...) -> Any: ...


PREVIEW = "gateway/preview"
"""The audit line's method of a mapping preview (the try page); never an A2M method."""


@runtime_checkable
class Previewable(Protocol):
    """A store that can show its documents beside their records (a Store, not a Federation)."""

    async def preview(self, n: int, caller: Caller = ...) -> list[dict[str, Any]]: ...


class Dispatcher:
    """Routes A2M calls to one store (or federation); knows every method of the draft."""

    def __init__(
        self,
        store: ServedStore,
        observers: list[Observer] | None = None,
        *,
        limiter: CallQuota | None = None,
        log_queries: bool = False,
    ) -> None:
        self.store = store
        self._observers = observers or []
        self._limiter = limiter
        self._log_queries = log_queries
        self._routes: dict[str, Callable[[Any, Caller], Awaitable[Any]]] = {
            "memory/describe": self._describe,
            "memory/recall": self._recall,
            "memory/timeline": self._timeline,
            "memory/fetch": self._fetch,
        }

    async def dispatch(self, method: str, params: Any, caller: Caller = LOCAL) -> Any:
        """Run one call for `caller` (set by the transport, never by the request).

        Raises:
            A2MError: every failure, engine and embedder trouble included (to_a2m_error).
        """
        return await self._observed(method, params, caller, self._dispatch)

    async def preview(self, params: Any, caller: Caller = LOCAL) -> Any:
        """The try page's mapping preview (not an A2M method), charged, audited and timed as one.

        Raises:
            A2MError: as dispatch; CapabilityNotSupported for a federation.
        """
        return await self._observed(PREVIEW, params, caller, self._preview)

    async def _preview(self, method: str, params: Any, caller: Caller) -> Any:
        parsed = parse_params(PreviewParams, params)
        store = self.store
        if not isinstance(store, Previewable):
            raise CapabilityNotSupported("A federation has no mapping preview; pick a member")
        await store.ensure_started()
        return {"documents": await store.preview(parsed.limit, caller)}

    async def _observed(
        self,
        method: str,
        params: Any,
        caller: Caller,
        run: Callable[[str, Any, Caller], Awaitable[Any]],
    ) -> Any:
        start = time.perf_counter()
        code = 0
        count: int | None = None
        tracing = active_tracing()
        span = tracing.call(self.store, method, params) if tracing is not None else None
        try:
            await self._charge(caller)
            result = await run(method, params, caller)
            if isinstance(result, dict) and isinstance(result.get("records"), list):
                count = len(result["records"])
            return result
        except Exception as exc:
            err = to_a2m_error(exc)
            code = int(err.code)
            if err is exc:
                raise
            raise err from exc
        finally:
            if span is not None:
                span.end(code, count)
            elapsed = time.perf_counter() - start
            for observe in self._observers:
                observe(
                    self.store.name,
                    method if method in METHOD_CAPABILITY else "other",
                    code,
                    elapsed,
                )
            extra: dict[str, Any] = {
                "store": self.store.name,
                "method": method[:64],
                "principal": caller.label[:300],
                "code": code,
                "results": count,
                "latency_ms": round(elapsed * 1000, 3),
            }
            if self._log_queries and isinstance(params, dict):
                query = params.get("query")
                if isinstance(query, str):
                    extra["query"] = query[:MAX_AUDITED_QUERY]
            audit.info("call", extra=extra)

    async def _charge(self, caller: Caller) -> None:
        """Take one token from the caller's bucket.

        Raises:
            QuotaExceeded: the bucket is empty; data carries retry_after_ms.
        """
        if self._limiter is None or caller.prepaid:
            return
        key = caller.rate_key
        if key is None:
            return
        wait_ms = await self._limiter.acquire(key)
        if wait_ms is not None:
            raise QuotaExceeded(
                "Rate limit exceeded for this caller", data={"retry_after_ms": wait_ms}
            )

    async def _dispatch(self, method: str, params: Any, caller: Caller) -> Any:
        cap = METHOD_CAPABILITY.get(method)
        if cap is None:
            raise MethodNotFound(f"Method not found: {method[:100]!r}")
        if method in WRITE_METHODS:
            raise ReadOnly(f"This store is read-only: {method} is refused")
        # Capabilities are known only once the engine has been read.
        await self.store.ensure_started()
        gate_method(self.store.declares, method)
        route = self._routes.get(method)
        if route is None:  # a declared capability with no route would be a bug
            raise CapabilityNotSupported(f"Server does not implement {method}")
        return await route(params, caller)

    async def _describe(self, params: Any, caller: Caller) -> Any:
        return self.store.describe(parse_params(DescribeParams, params), caller)

    async def _recall(self, params: Any, caller: Caller) -> Any:
        return await self.store.recall(parse_params(RecallParams, params), caller)

    async def _timeline(self, params: Any, caller: Caller) -> Any:
        return await self.store.timeline(parse_params(TimelineParams, params), caller)

    async def _fetch(self, params: Any, caller: Caller) -> Any:
        return await self.store.fetch(parse_params(FetchParams, params), caller)


def to_a2m_error(exc: BaseException) -> A2MError:
    """The single exception-to-wire boundary: any exception becomes an A2MError.

    Engine trouble (unreachable, failing after retries, past the deadline, its
    breaker open, its calls shed) is a retryable -32603 with `data.reason`; a
    deterministic refusal of the query is -32602, not retryable (DECISIONS.md §2).
    Anything unexpected is logged here with its traceback and leaves as a bare
    INTERNAL_ERROR.
    """
    if isinstance(exc, A2MError):
        return exc
    if isinstance(exc, EmbedderUnavailable):
        if exc.retryable:
            return BackendUnavailable(retry_after_ms=exc.retry_after_ms)
        # A refusal (a bad key, a model that cannot load) will not heal by retrying.
        log.error("query embedder refused: %s", exc)
        return InternalError(
            "The store's query embedder refused the request",
            data={"reason": "embedder_refused", "retryable": False},
        )
    if isinstance(exc, CircuitOpen):
        return CircuitOpenError(retry_after_ms=exc.retry_after_ms)
    if isinstance(exc, Overloaded):
        return BackendOverloaded(retry_after_ms=exc.retry_after_ms)
    if isinstance(exc, EngineUnavailable):
        return BackendUnavailable(retry_after_ms=exc.retry_after_ms)
    if isinstance(exc, EngineTimeout):
        return BackendTimeout()
    if isinstance(exc, QueryTooLarge):
        return InvalidParams(
            "The query is too large for the search engine "
            "(too many terms, or a key_prefix over 1000 characters)",
            data={"reason": "query_too_large", "retryable": False},
        )
    if isinstance(exc, EngineRejected):
        log.error("engine refused a query: %s", type(exc).__name__)
        return InvalidParams("The search engine refused this query", data={"retryable": False})
    if isinstance(exc, EngineConfigError):
        # Connector messages are fixed strings naming the config key, never a host.
        log.error("store unusable: %s", exc)
        return InternalError(
            "The store's index is missing or does not match its configuration",
            data={"reason": "index_unusable", "retryable": False},
        )
    if isinstance(exc, ConnectorError):
        return BackendUnavailable()
    log.exception("unhandled error", exc_info=exc)
    return InternalError()
