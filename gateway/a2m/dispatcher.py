"""A2M dispatcher: method name -> registry entry -> params model -> the source's front."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from connectors.errors import ConnectorError
from gateway.a2m.errors import CapabilityNotSupported, MethodNotFound, ReadOnly, ScopeDenied
from gateway.a2m.failures import engine_trouble
from gateway.a2m.failures import to_a2m_error as to_a2m_error
from gateway.a2m.methods import METHODS
from gateway.a2m.params import PreviewParams, parse_params
from gateway.front.front import Front
from gateway.front.ledger import Ledger, Observer
from gateway.observability.telemetry import active as active_tracing
from gateway.resilience import GuardRefusal
from gateway.security.scopes import LOCAL, Caller

__all__ = ["PREVIEW", "Dispatcher", "Observer", "Previewable", "ServedSource", "to_a2m_error"]

DESCRIBE = "memory/describe"
PREVIEW = "gateway/preview"
"""The audit line's method of a mapping preview (the try page); never an A2M method."""


class ServedSource(Protocol):
    """What a dispatcher serves: a Store, or a Federation of stores (each holds its front)."""

    @property
    def name(self) -> str: ...

    @property
    def front(self) -> Front: ...

    async def ensure_started(self) -> None: ...

    def admits(self, caller: Caller) -> bool: ...


@runtime_checkable
class Previewable(Protocol):
    """A store that can show its documents beside their records (a Store, not a Federation)."""

    async def preview(self, n: int, caller: Caller = ...) -> list[dict[str, Any]]: ...


class Dispatcher:
    """Routes A2M calls to one store (or federation) through its front."""

    def __init__(
        self,
        store: ServedSource,
        observers: list[Observer] | None = None,
        *,
        ledger: Ledger | None = None,
    ) -> None:
        self.store = store
        self.front = store.front
        self.ledger = ledger or Ledger()
        self._observers = observers or []
        # Each served method's params model and front method, bound once.
        self._served = {
            m.name: (m.params, bound)
            for m in METHODS.values()
            if m.params is not None and (bound := m.bind(self.front)) is not None
        }

    async def dispatch(self, method: str, params: Any, caller: Caller = LOCAL) -> Any:
        """Run one call for `caller` (set by the transport, never by the request).

        Raises:
            A2MError: every failure, engine and embedder trouble included (to_a2m_error).
        """
        return await self._observed(method, params, caller, self._dispatch)

    async def preview(self, params: Any, caller: Caller = LOCAL) -> Any:
        """The try page's mapping preview (not an A2M method), audited and timed as one.

        Raises:
            A2MError: as dispatch; CapabilityNotSupported for a federation.
        """
        return await self._observed(PREVIEW, params, caller, self._preview)

    async def _preview(self, method: str, params: Any, caller: Caller) -> Any:
        self._admit(caller)
        parsed = parse_params(PreviewParams, params)
        store = self.store
        if not isinstance(store, Previewable):
            raise CapabilityNotSupported("A federation has no mapping preview; pick a member")
        await self.store.ensure_started()
        return {"documents": await store.preview(parsed.limit, caller)}

    def _admit(self, caller: Caller) -> None:
        """Raises: ScopeDenied: `caller` may not use this store (its ``scope.allow``)."""
        if not self.store.admits(caller):
            # The same words for every store refused: the message names none of them.
            raise ScopeDenied("Scope denied: this caller may not use this store")

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
            result = await run(method, params, caller)
            if isinstance(result, dict):
                records = result.get("records")
                if isinstance(records, list):
                    count = len(records)
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
            name = self.store.name
            for observe in self._observers:
                observe(name, method if method in METHODS else "other", code, elapsed)
            self.ledger.record(name, method, caller, code, count, elapsed, params)

    async def _dispatch(self, method: str, params: Any, caller: Caller) -> Any:
        entry = METHODS.get(method)
        if entry is None:
            raise MethodNotFound(f"Method not found: {method[:100]!r}")
        self._admit(caller)
        if entry.writes:
            raise ReadOnly(f"This store is read-only: {method} is refused")
        # Capabilities are known only once the engine has been read.
        try:
            await self.store.ensure_started()
        except (ConnectorError, GuardRefusal) as exc:
            # describe says what the config declares (all but `embeddings`, which the index
            # decides): it answers while the engine is down; every read still refuses.
            if method != DESCRIBE or engine_trouble(exc) is None:
                raise
        self.front.gate_method(method)
        served = self._served.get(method)
        if served is None:
            # a declared capability with no handler would be a bug
            raise CapabilityNotSupported(f"Server does not implement {method}")
        model, handler = served
        return await handler(parse_params(model, params), caller)
