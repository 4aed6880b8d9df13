"""Bounded, jittered retries of idempotent reads, inside the request deadline.

The store sets the deadline (``deadline_scope``); a connector wraps each engine
read in ``retry_read`` and asks ``remaining()`` for the per-call client timeout.
Only failures the connector classifies as transient are retried. An engine that
says when to come back (``Retry-After``) is not asked again sooner, and not at all
when that is past the deadline: the caller gets the engine's wait at once instead.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import TracebackType
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from connectors.errors import EngineTimeout

T = TypeVar("T")

_deadline: ContextVar[float | None] = ContextVar("a2m_deadline", default=None)
_retries: ContextVar[int] = ContextVar("a2m_retries", default=0)

RetryHook = Callable[[], None]
RetryAfter = Callable[[BaseException], float | None]
"""The seconds an engine's failure asked to wait before another try, if it said."""
_on_retry: list[RetryHook] = []


def on_retry(hook: RetryHook) -> None:
    """Register a callback run once per retry (the metrics module counts them)."""
    _on_retry.append(hook)


def remaining(default: float = 30.0) -> float:
    """Seconds left before the current request's deadline (default when none is set)."""
    dl = _deadline.get()
    if dl is None:
        return default
    return max(0.0, dl - time.monotonic())


class deadline_scope:
    """Run the block under a deadline; overrunning it raises EngineTimeout.

    A class rather than an ``asynccontextmanager``: no async generator per engine read.

    Raises:
        EngineTimeout: the block did not finish within ``seconds``.
    """

    __slots__ = ("_seconds", "_timeout", "_token")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    async def __aenter__(self) -> None:
        self._token = _deadline.set(time.monotonic() + self._seconds)
        self._timeout = asyncio.timeout(self._seconds)
        await self._timeout.__aenter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._timeout.__aexit__(kind, exc, tb)
        except TimeoutError:
            raise EngineTimeout("deadline exceeded") from None
        finally:
            _deadline.reset(self._token)
        if kind is not None and issubclass(kind, TimeoutError):
            raise EngineTimeout("deadline exceeded") from None


def _deadline_reached() -> bool:
    dl = _deadline.get()
    return dl is not None and time.monotonic() >= dl - 0.05


def _told_to_wait_past_deadline(seconds: float | None) -> bool:
    return seconds is not None and seconds >= remaining() - 0.05


def _no_hint(exc: BaseException) -> float | None:
    return None


def _asked(retry_after: RetryAfter, retry_state: RetryCallState) -> float | None:
    """The wait the failure of the attempt that just ended asked for, if any."""
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    return retry_after(exc) if exc is not None else None


class _StopBeforeDeadline(stop_base):
    """Stop retrying once the request's deadline is (nearly) reached, or the engine
    asked to be left alone until after it."""

    def __init__(self, retry_after: RetryAfter) -> None:
        self._retry_after = retry_after

    def __call__(self, retry_state: RetryCallState) -> bool:
        return _deadline_reached() or _told_to_wait_past_deadline(
            _asked(self._retry_after, retry_state)
        )


class _AtLeastRetryAfter:
    """The backoff's wait, or the engine's Retry-After when that is longer."""

    def __init__(self, retry_after: RetryAfter) -> None:
        self._backoff = wait_random_exponential(multiplier=0.1, max=1.0)
        self._retry_after = retry_after

    def __call__(self, retry_state: RetryCallState) -> float:
        return max(self._backoff(retry_state), _asked(self._retry_after, retry_state) or 0.0)


async def retry_read(
    call: Callable[[], Awaitable[T]],
    *,
    transient: Callable[[BaseException], bool],
    attempts: int,
    retry_after: RetryAfter = _no_hint,
) -> T:
    """Call ``call`` up to ``attempts``+1 times while it fails transiently.

    ``retry_after`` reads the engine's Retry-After off a failure: the next try waits at
    least that long, and none is made when it would land past the deadline.
    The last exception propagates unchanged, for the connector to translate.
    """

    # Fast path: almost every read succeeds first time, and building tenacity's
    # machinery for each call costs more than the rest of the connector's own work.
    try:
        return await call()
    except Exception as exc:
        if attempts < 1 or not transient(exc) or _deadline_reached():
            raise
        asked = retry_after(exc)
        if _told_to_wait_past_deadline(asked):
            raise

    def _count(state: RetryCallState | None) -> None:
        for hook in _on_retry:
            hook()

    # The first attempt failed transiently: count it and wait as tenacity would have
    # (the first interval of the backoff below), then let tenacity run the rest, its
    # multiplier doubled so that the intervals continue where this one left off.
    _count(None)
    jitter = random.uniform(0, 0.05)  # noqa: S311 - jitter, not a secret
    await asyncio.sleep(max(jitter, asked or 0.0))
    retrying = AsyncRetrying(
        retry=retry_if_exception(transient),
        stop=stop_any(stop_after_attempt(attempts), _StopBeforeDeadline(retry_after)),
        wait=_AtLeastRetryAfter(retry_after),
        reraise=True,
        before_sleep=_count,
    )
    async for attempt in retrying:
        with attempt:
            return await call()
    raise AssertionError("unreachable: tenacity reraises the last error")
