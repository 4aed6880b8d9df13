"""What a Qdrant server's REST answer may be, checked before qdrant-client reads it.

A proxy in front of the server (a sign-on page, a load balancer's error page) answers
things a Qdrant server never does. :func:`check_answer` is an httpx response hook (given
to qdrant-client, which passes its extra keyword arguments to ``httpx.AsyncClient``): it
reads the answer and raises :class:`connectors.http_answer.BadResponse` saying in one
sentence what came back, which ``connectors.qdrant.errors`` turns into the connector's
error. Only the REST path has it; a gRPC answer is typed by its protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from connectors.http_answer import (
    BROKEN_CODING,
    BadResponse,
    Response,
    error_page,
    foreign_status,
    retry_after_ms,
    usable,
)

if TYPE_CHECKING:
    import httpx

QDRANT_ERROR_STATUS: Final = frozenset({400, 401, 403, 404, 408, 409, 422, 429, 500, 503, 507})
"""The error statuses a Qdrant server answers a read with (its storage errors, strict mode,
authentication, request validation); any other error status came from something else."""


def describe(method: str, status: int, headers: Mapping[str, str], body: bytes) -> str | None:
    """What came back, in one sentence, when it is not an answer a Qdrant server gives a
    read; None when it is one (an error status Qdrant sends is left to the error mapping).
    """
    if status < 400:
        try:
            usable(method, Response(status, dict(headers), body))
        except BadResponse as exc:
            return str(exc)
        return None
    page = error_page(status, headers)
    if page is not None:
        return page
    return None if status in QDRANT_ERROR_STATUS else foreign_status(status)


async def check_answer(response: httpx.Response) -> None:
    """httpx response hook: read the answer and refuse one that is not Qdrant's.

    Raises:
        BadResponse: what came back, in one sentence (a page, an empty or still
            compressed body, a redirect, a status Qdrant never sends, a content coding
            that cannot be undone), with the ``Retry-After`` it carried.
    """
    import httpx

    try:
        body = await response.aread()
    except httpx.DecodingError:
        raise BadResponse(BROKEN_CODING) from None
    reason = describe(response.request.method, response.status_code, response.headers, body)
    if reason is not None:
        raise BadResponse(reason, retry_after_ms(response.headers))
