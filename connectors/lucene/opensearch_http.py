"""opensearch-py connections that keep a busy node's ``Retry-After``.

opensearch-py raises an error answer as a ``TransportError`` of status, message
and body: the headers are gone, so a 429's ``Retry-After`` never reaches the
retry loop. These connection classes ask the stock ones to hand 429 and 503
back as answers (their ``ignore`` argument), then raise the same error the
stock class would, with the header's wait attached as ``retry_after_ms``. The
transport, the pool and every other status are the library's own.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import cache
from typing import Any

from connectors.lucene.failures import retry_after_ms
from connectors.pooled import ResendOnDeadConnection

HINTED = frozenset({429, 503})
"""The statuses whose Retry-After the retry loop can use."""


class _KeepsRetryAfter:
    """Mixin over an opensearch-py async connection class."""

    async def perform_request(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the library's signature
        ignore: Collection[int] = (),
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        status, response_headers, raw = await super().perform_request(  # type: ignore[misc]
            method, url, params, body, timeout=timeout, ignore=(*ignore, *HINTED), headers=headers
        )
        if status in HINTED and status not in ignore:
            try:
                self._raise_error(status, raw, response_headers.get("content-type"))  # type: ignore[attr-defined]
            except Exception as exc:
                exc.retry_after_ms = retry_after_ms(response_headers)  # type: ignore[attr-defined]
                raise
        return status, response_headers, raw


@cache
def connection_class(*, signing: bool) -> type:
    """The aiohttp connection (the client's default), or the one that calls a SigV4 signer;
    either resends a request that met a dead pooled connection (connectors.pooled)."""
    from opensearchpy import AIOHttpConnection, AsyncHttpConnection

    base: type = AsyncHttpConnection if signing else AIOHttpConnection
    return type(f"RetryAfter{base.__name__}", (_KeepsRetryAfter, ResendOnDeadConnection, base), {})
