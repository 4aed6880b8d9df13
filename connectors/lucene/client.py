"""Engine calls of the Elasticsearch/OpenSearch connectors: the client and its retries.

:class:`LuceneClient` owns the client its dialect makes and its life (make,
close, a caller's view, ping) and runs every read through :meth:`LuceneClient.read`:
bounded retries of idempotent reads inside the request deadline, each client
exception read as an :class:`~connectors.lucene.failures.EngineFailure` and raised
as a neutral :mod:`connectors.errors` error.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import quote

from connectors.errors import (
    ConnectorError,
    EngineAnswerUnusable,
    EngineTimeout,
    EngineUnavailable,
)
from connectors.lucene.failures import NOT_AN_OBJECT, EngineFailure, LegFailed, lost_shards
from connectors.lucene.query import Body
from connectors.retry import remaining, retry_read
from connectors.tracing import engine_tracer, operation_of, with_headers

if TYPE_CHECKING:
    from connectors.lucene.dialect import Dialect
    from connectors.lucene.spec import LuceneSpec

logger = logging.getLogger(__name__)

T = TypeVar("T")


class LuceneClient:
    """One store's engine client (made by its dialect) and the retried, translated calls."""

    def __init__(self, spec: LuceneSpec, dialect: Dialect) -> None:
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
        """One engine request, no retry, the client's exceptions untranslated; one engine
        span when tracing is on (:mod:`connectors.tracing`).

        Raises:
            LegFailed: a search answered with shards lost to a node leaving the cluster.
            EngineAnswerUnusable: the answer is JSON but not an object.
        """
        tracer = engine_tracer()
        if tracer is None:
            answer = await self._dialect.request(
                self._client,
                method,
                path,
                seconds=seconds,
                body=body,
                params=params,
                headers=self._headers,
            )
        else:
            with tracer.request(self._dialect.name, operation_of(path), self._spec.index) as extra:
                answer = await self._dialect.request(
                    self._client,
                    method,
                    path,
                    seconds=seconds,
                    body=body,
                    params=params,
                    headers=with_headers(self._headers, extra),
                )
        if type(answer) is not dict:  # parsed JSON: an object is a dict
            raise EngineAnswerUnusable(NOT_AN_OBJECT)
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
