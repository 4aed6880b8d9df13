"""An issuer's signing keys from its JWKS URL: fetched, parsed and cached.

The provider is a peer the gateway does not control, and it fails in every way a
peer can: refused or reset connections (also in the middle of the body), hangs,
TLS errors, truncated bodies, redirects, and bodies that are not a JWKS.
:func:`fetch_jwks` turns each of those into one exception, :class:`JwksFetchError`,
so :class:`JwksCache` treats every one as a failed fetch: cooled down, single
flight, and never an error escaping to the caller. Redirects are refused rather
than followed: a JWKS URL is configured, and a key set served from somewhere else
is not one the operator chose.
"""

from __future__ import annotations

import asyncio
import http.client
import logging
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, NoReturn

import jwt
import orjson

log = logging.getLogger(__name__)

MAX_JWKS_BYTES = 1 << 20
"""A key set is a few KiB; a body past this is not one."""
_CHUNK = 16_384


class JwksFetchError(Exception):
    """The provider did not give a usable key set; ``reason`` is a short, safe word."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, *args: Any, **kwargs: Any) -> NoReturn:
        fp.close()
        raise JwksFetchError("redirect refused")


def signing_keys(data: object) -> list[jwt.PyJWK]:
    """The signature keys of a parsed JWKS document.

    Raises:
        JwksFetchError: not a JWKS, or one without a usable signature key.
    """
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise JwksFetchError("not a JWKS")
    keys = []
    for entry in data["keys"]:
        # One odd key (an unknown kty, a field of the wrong type) does not void the others.
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError, AttributeError):
            continue
        if key.public_key_use in ("sig", None):
            keys.append(key)
    if not keys:
        raise JwksFetchError("no usable key")
    return keys


def _read(response: http.client.HTTPResponse, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(_CHUNK):  # one recv each: the deadline is checked between
        size += len(chunk)
        if size > MAX_JWKS_BYTES:
            raise JwksFetchError("body too large")
        if time.monotonic() > deadline:
            raise JwksFetchError("timeout")  # a trickling body: each read in time, the whole not
        chunks.append(chunk)
    return b"".join(chunks)


def fetch_jwks(
    url: str, *, timeout_s: float, ssl_context: ssl.SSLContext | None = None
) -> list[jwt.PyJWK]:
    """GET the key set at ``url`` within ``timeout_s`` (blocking: run it in a thread).

    Raises:
        JwksFetchError: any failure, from the connection to the last key.
    """
    deadline = time.monotonic() + timeout_s
    opener = urllib.request.build_opener(
        _RefuseRedirects(), urllib.request.HTTPSHandler(context=ssl_context)
    )
    # The scheme is https (http on loopback only): JwtConfig checks it.
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    try:
        with opener.open(request, timeout=timeout_s) as response:
            body = _read(response, deadline)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise JwksFetchError(f"HTTP {exc.code}") from None
    # OSError covers URLError, resets, refusals, timeouts and ssl.SSLError, raised while
    # connecting or while reading; HTTPException covers truncated bodies and bad heads.
    except (OSError, http.client.HTTPException) as exc:
        raise JwksFetchError(_failure(exc)) from None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise JwksFetchError("not JSON") from None
    return signing_keys(data)


def _failure(exc: BaseException) -> str:
    """A word for the log: never the URL (it may carry credentials) nor the peer's text."""
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ssl.SSLError):
        return "TLS error"
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "connection reset"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, http.client.IncompleteRead):
        return "truncated body"
    if isinstance(exc, http.client.HTTPException):
        return "bad HTTP answer"
    return "connection failed"


class JwksCache:
    """An issuer's JWKS from its URL: cached, fetched single-flight, failures cooled down.

    Whatever callers send, the identity provider sees at most one fetch in flight
    and, after a fetch (failed or not), no other within ``cooldown_s`` unless the
    cache has expired and the last fetch succeeded. During a provider outage the
    keys last fetched keep verifying tokens; without any, tokens are refused at
    once instead of each waiting on the provider.
    """

    def __init__(
        self,
        url: str,
        *,
        lifespan_s: float,
        cooldown_s: float,
        timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self._timeout_s = timeout_s
        self._ssl_context = ssl_context
        self._lifespan_s = lifespan_s
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._keys: list[jwt.PyJWK] = []
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._failed = False
        self._completed = 0
        self._lock = asyncio.Lock()
        self.fetches = 0
        """Fetches sent to the provider (for tests and metrics)."""

    @property
    def unavailable(self) -> bool:
        """No key is held and the last fetch failed."""
        return not self._keys and self._failed

    def _cooling(self) -> bool:
        return self._attempted_at is not None and (
            self._clock() - self._attempted_at < self._cooldown_s
        )

    def _expired(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self._lifespan_s

    async def key(
        self, kid: str | None, pick: Callable[[list[jwt.PyJWK]], jwt.PyJWK | None]
    ) -> jwt.PyJWK | None:
        """The key ``pick`` chooses, fetching the set first when it is due; None if none."""
        if self._expired() and not (self._failed and self._cooling()):
            await self._refresh()
        key = pick(self._keys)
        if key is None and kid is not None and not self._cooling():
            await self._refresh()  # an unknown kid: maybe a rotation; once per cooldown
            key = pick(self._keys)
        return key

    async def _refresh(self) -> None:
        seen = self._completed
        async with self._lock:
            if self._completed != seen:
                return  # a fetch finished while this request waited: use its result
            self._attempted_at = self._clock()
            self.fetches += 1
            try:
                # The thread's own reads are bounded by the same deadline; the margin only
                # covers a read that was already blocked when it passed.
                keys = await asyncio.wait_for(
                    asyncio.to_thread(
                        fetch_jwks,
                        self._url,
                        timeout_s=self._timeout_s,
                        ssl_context=self._ssl_context,
                    ),
                    self._timeout_s + 1.0,
                )
            except (JwksFetchError, TimeoutError) as exc:
                self._failed = True
                reason = exc.reason if isinstance(exc, JwksFetchError) else "timeout"
                log.warning(
                    "JWKS fetch failed (%s); %s; next attempt in %.0f s at the earliest",
                    reason,
                    "cached keys kept" if self._keys else "no keys held",
                    self._cooldown_s,
                )
            else:
                self._keys, self._fetched_at, self._failed = keys, self._clock(), False
            finally:
                self._completed += 1
