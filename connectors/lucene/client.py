"""Engine calls of the Elasticsearch/OpenSearch connectors: the client, retries, errors.

:class:`LuceneClient` owns the client its dialect makes and its life (make,
close, a caller's view, ping) and runs every read through :meth:`LuceneClient.read`:
bounded retries of idempotent reads inside the request deadline, and the one
place a client exception becomes a neutral :mod:`connectors.errors` error
(:class:`EngineFailure`, fixed messages, no hosts or credentials).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar
from urllib.parse import quote

from connectors.errors import (
    ConnectorError,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    QueryTooLarge,
)
from connectors.lucene.query import Body
from connectors.retry import remaining, retry_read
from connectors.tracing import trace_transport

if TYPE_CHECKING:
    from connectors.lucene.dialect import Dialect
    from connectors.spec import ConnectorSpec

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
_TOO_LARGE = frozenset({"too_many_clauses", "too_many_nested_clauses"})
"""Root causes that mean the query itself is too large, whatever the status."""
_NODE_LOST = frozenset(
    {
        "node_disconnected_exception",
        "node_not_connected_exception",
        "node_closed_exception",
        "connect_transport_exception",
        "send_request_transport_exception",
        "no_shard_available_action_exception",
    }
)
"""Causes of a 5xx that a node leaving the cluster gives while the search ran on it: the
copies elsewhere answer a second attempt (a cluster losing a node answers 500 with these)."""


@dataclass(frozen=True, slots=True)
class EngineFailure:
    """A client exception reduced to what the connector decides on."""

    kind: Literal["connection", "timeout", "status"]
    status: int | None = None
    retry_after_ms: int | None = None
    causes: frozenset[str] = frozenset()
    """The error types the engine named (``error.type``, ``root_cause``, ``caused_by``)."""

    @property
    def too_large(self) -> bool:
        return bool(self.causes & _TOO_LARGE)

    @property
    def transient(self) -> bool:
        """Worth retrying: the engine was unreachable, said 'busy', or lost a node while it
        searched. Timeouts are not retried: the deadline is mostly spent by then; nor is a
        query too large."""
        if self.too_large:
            return False
        if self.kind == "connection" or self.status in _TRANSIENT_STATUS:
            return True
        return (self.status or 0) >= 500 and bool(self.causes & _NODE_LOST)

    def error(self, *, opening: bool = False) -> ConnectorError:
        """The engine-neutral exception; fixed messages, no hosts or credentials."""
        retry_after = self.retry_after_ms if self.retry_after_ms is not None else 1000
        if self.kind == "timeout":
            return EngineTimeout("the engine did not answer in time")
        if self.kind == "connection":
            return EngineUnavailable("the engine cannot be reached", retry_after_ms=retry_after)
        if self.too_large:
            return QueryTooLarge("the engine refused the query as too large")
        status = self.status or 0
        if status == 429:
            return EngineUnavailable("the engine is overloaded", retry_after_ms=retry_after)
        if status >= 500:
            return EngineUnavailable(
                f"the engine failed (HTTP {status})", retry_after_ms=retry_after
            )
        if status == 404 and not self.causes:
            # An engine names its 404 (index_not_found_exception); a bare one is another server.
            return EngineConfigError(
                "connection.hosts: the address answered HTTP 404 without an engine's error "
                "body; it is not an Elasticsearch or OpenSearch node (check the URL and port)"
            )
        if status == 404:
            return EngineConfigError("index: the index does not exist in the engine")
        if status in (401, 403):
            if opening:
                return EngineConfigError(
                    "connection: the engine refused the credentials, or they lack the "
                    "read and view_index_metadata privileges on the index"
                )
            return EngineRejected(f"the engine refused the credentials (HTTP {status})")
        return EngineRejected(f"the engine rejected the query (HTTP {status})")


def error_causes(body: Any) -> frozenset[str]:
    """The error types in an engine's error body: its type, root causes and causes, nested."""
    out: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > 8:
            return
        if isinstance(node.get("type"), str):
            out.add(node["type"])
        for cause in node.get("root_cause") or []:
            walk(cause, depth + 1)
        walk(node.get("caused_by"), depth + 1)
        for failed in node.get("failed_shards") or []:
            walk(failed.get("reason") if isinstance(failed, Mapping) else None, depth + 1)

    if isinstance(body, Mapping):
        walk(body.get("error"), 0)
    return frozenset(out)


def retry_after_ms(headers: Mapping[str, str] | None) -> int | None:
    """The ``Retry-After`` header (seconds) in milliseconds, when the engine sent one."""
    if not headers:
        return None
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0, int(float(value) * 1000))
            except ValueError:
                return None
    return None


class LegFailed(Exception):
    """One search of an ``_msearch`` failed (the others may have answered)."""

    def __init__(self, failure: EngineFailure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


def lost_shards(answer: Mapping[str, Any]) -> EngineFailure | None:
    """The failure a search answer stands for when shards failed because a node left.

    Such an answer is 200 with fewer hits than the index holds (a copy on the lost node
    was being read); another attempt reads the other copy. Shard failures of any other
    cause are the engine's answer and stay as they are.
    """
    shards = answer.get("_shards")
    # A decoded body's objects are dicts; isinstance on the Mapping ABC would cost more than
    # the rest of this check on every answer.
    if type(shards) is not dict or not shards.get("failed"):
        return None
    causes: set[str] = set()
    for failed in shards.get("failures") or []:
        reason = failed.get("reason") if isinstance(failed, Mapping) else None
        causes |= error_causes({"error": reason})
    if not causes & _NODE_LOST:
        return None
    return EngineFailure("status", status=500, causes=frozenset(causes))


def msearch_responses(answer: Mapping[str, Any], expected: int) -> list[dict[str, Any]]:
    """The per-search answers of an ``_msearch``, in order.

    Raises:
        LegFailed: a search failed (its status and causes, as one failed ``_search``),
            or the engine answered a different number of searches.
    """
    responses = answer.get("responses")
    if not isinstance(responses, list) or len(responses) != expected:
        raise LegFailed(EngineFailure("status", status=502))
    for r in responses:
        if not isinstance(r, Mapping) or "error" in r:
            status = r.get("status") if isinstance(r, Mapping) else None
            failure = EngineFailure(
                "status",
                status=status if isinstance(status, int) else 500,
                causes=error_causes(r),
            )
            raise LegFailed(failure)
        lost = lost_shards(r)
        if lost is not None:
            raise LegFailed(lost)
    return [dict(r) for r in responses]


class LuceneClient:
    """One store's engine client (made by its dialect) and the retried, translated calls."""

    def __init__(self, spec: ConnectorSpec, dialect: Dialect) -> None:
        """Nothing is contacted here; the client is made by :meth:`connect`."""
        self._spec = spec
        self._dialect = dialect
        self._timeout_s = spec.connection.timeout_ms / 1000
        self._client: Any = None
        self._headers: Mapping[str, str] | None = None
        self._view = False

    @property
    def client(self) -> Any:
        """The dialect's client, or None before :meth:`connect` and after :meth:`close`."""
        return self._client

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    async def connect(self) -> None:
        """Make the client unless one is open (no engine request).

        Raises:
            EngineConfigError: the connection settings cannot make a client.
        """
        if self._client is None:
            self._client = await self._dialect.make_client(self._spec)
            trace_transport(self._client.transport, self._dialect.name, self._spec.index)

    # ---- calls

    async def call(
        self,
        method: str,
        path: str,
        seconds: float,
        *,
        body: Body | bytes | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Mapping[str, Any]:
        """One engine request, no retry, the client's exceptions untranslated.

        Raises:
            LegFailed: a search answered with shards lost to a node leaving the cluster.
        """
        answer = await self._dialect.request(
            self._client,
            method,
            path,
            seconds=seconds,
            body=body,
            params=params,
            headers=self._headers,
        )
        lost = lost_shards(answer)
        if lost is not None:
            raise LegFailed(lost)
        return answer

    def call_timeout(self) -> float:
        """Per-call client timeout: the connection's, cut to what the request deadline leaves.

        With several nodes an attempt gets at most half of what is left, so that a node
        that hangs (stopped, partitioned) leaves time to ask another one.

        Raises:
            EngineTimeout: the deadline has already passed.
        """
        left = remaining(default=self._timeout_s)
        if left <= 0:
            raise EngineTimeout("the engine did not answer in time")
        if self._spec.connection.fails_over:
            left /= 2
        return min(self._timeout_s, left)

    def failure(self, exc: BaseException) -> EngineFailure | None:
        """The failure a client exception (or a failed ``_msearch`` leg) stands for."""
        return exc.failure if isinstance(exc, LegFailed) else self._dialect.classify(exc)

    def _is_transient(self, exc: BaseException) -> bool:
        """Worth another attempt; a timed-out one only when another node can take it (the
        client has marked the silent one dead, so the retry goes elsewhere)."""
        failure = self.failure(exc)
        if failure is None:
            return False
        return failure.transient or (failure.kind == "timeout" and self._spec.connection.fails_over)

    def _retry_after_s(self, exc: BaseException) -> float | None:
        """The engine's Retry-After, when the failure carried one (see ``EngineFailure``)."""
        failure = self.failure(exc)
        if failure is None or failure.retry_after_ms is None:
            return None
        return failure.retry_after_ms / 1000

    async def read(self, call: Callable[[float], Awaitable[T]], *, opening: bool = False) -> T:
        """Run an idempotent read with retries, translating the client's exceptions.

        Raises:
            EngineUnavailable: unreachable, or 429/5xx after retries.
            EngineTimeout: the call or the request deadline timed out.
            EngineRejected: any other 4xx.
            EngineConfigError: the index is missing (404), or refused credentials at open().
        """

        if self._client is None:
            # Closed (or a failed open()): the store must reopen before reading.
            raise EngineUnavailable("the connector is closed", retry_after_ms=1000)

        async def attempt() -> T:
            return await call(self.call_timeout())

        try:
            return await retry_read(
                attempt,
                transient=self._is_transient,
                attempts=self._spec.connection.retries,
                retry_after=self._retry_after_s,
            )
        except ConnectorError:
            raise
        except Exception as exc:
            failure = self.failure(exc)
            if failure is None:
                raise
            # The client's text can hold URLs and index names: debug level only.
            logger.debug("engine call failed: %s", failure, exc_info=True)
            raise failure.error(opening=opening) from exc

    async def read_call(
        self,
        method: str,
        path: str,
        *,
        body: Body | bytes | None = None,
        params: Mapping[str, str] | None = None,
        opening: bool = False,
    ) -> Mapping[str, Any]:
        """One retried engine request (see :meth:`read`)."""
        return await self.read(
            lambda seconds: self.call(method, path, seconds, body=body, params=params),
            opening=opening,
        )

    # ---- life

    async def close(self) -> None:
        if self._view:
            return  # a caller's view shares its parent's client; the parent closes it
        client, self._client = self._client, None
        if client is not None:
            await self._dialect.close_client(client)

    def for_caller(self, authorization: str) -> Self:
        """A view on the same client whose requests carry ``authorization`` instead of
        the store's credential; no I/O.

        Raises:
            EngineUnavailable: the client is not open.
        """
        if self._client is None:
            raise EngineUnavailable("engine connector is closed")
        view = copy.copy(self)
        view._view = True
        view._headers = {"authorization": authorization}
        return view

    async def ping(self) -> bool:
        """True when the store's index can serve searches; never raises.

        It asks the index's health, not the node's: a node that has just restarted answers
        HTTP before its shards are assigned (``red``), and one shedding load answers 429;
        neither would serve the search the breaker lets through next. Any other 4xx
        (a missing index: 408, refused credentials) means the engine is up: the caller's
        search gets that answer as its own error. A remote index (``cluster:index``) is
        not in the local cluster state, so its cluster's health is asked instead.

        With several nodes, one that is down or hangs does not make the engine unready:
        the client marks it dead and the next try asks another node, all within 5 s.
        Not open, or closed: False, and no client is built (it would leak a pool).
        """
        if self._client is None:
            return False
        c = self._spec.connection
        tries = max(1, len(c.hosts)) if c.fails_over else 1
        seconds = min(self._timeout_s, 5.0) / tries
        index = self._spec.index
        path = "/_cluster/health" if ":" in index else f"/_cluster/health/{quote(index, safe=',*')}"
        for _ in range(tries):
            try:
                # local: the node answers from its own cluster state, so readiness does
                # not wait on the elected manager (an election takes seconds); timeout=0s:
                # the state now, never a wait for a better one.
                health = await self.call("GET", path, seconds, params=HEALTH_NOW)
            except Exception as exc:  # ping never raises; classify what the client threw
                failure = self._dialect.classify(exc)
                if failure is None:
                    return False
                if failure.kind == "status" and (failure.status or 0) < 500:
                    return failure.status != 429
                continue
            return health.get("status") != "red"
        return False


HEALTH_NOW: Mapping[str, str] = {"local": "true", "timeout": "0s"}
