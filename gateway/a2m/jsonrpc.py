"""JSON-RPC 2.0 envelope: parsing and responses.

Deliberately not A2M-aware: it turns bytes into a Request and results or A2M
errors back into bytes; anything else is a bare internal error. What an engine
or embedder failure means on the wire is decided once, by the dispatcher
(gateway.a2m.failures.to_a2m_error). Every transport calls :func:`handle_message`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.a2m.errors import A2MError, InternalError, InvalidRequest, ParseError

log = logging.getLogger(__name__)

RequestId = str | int | float | None

_MISSING = object()


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: Any
    notification: bool


class EnvelopeError(Exception):
    """A message that cannot be admitted; carries the id to echo when one was readable."""

    def __init__(self, error: A2MError, request_id: RequestId = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def parse_request(raw: bytes | str) -> Request:
    """Parse one JSON-RPC 2.0 request or notification.

    Raises:
        EnvelopeError: -32700 for non-JSON, -32600 for anything but a single request object.
    """
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise EnvelopeError(ParseError()) from None
    if isinstance(msg, list):
        raise EnvelopeError(InvalidRequest("Invalid request: batches are not supported (A2M §8)"))
    if not isinstance(msg, dict):
        raise EnvelopeError(InvalidRequest("Invalid request: expected a JSON-RPC request object"))
    rid = msg.get("id", _MISSING)
    if rid is not _MISSING and not _valid_id(rid):
        raise EnvelopeError(InvalidRequest("Invalid request: id must be a string, number or null"))
    echo: RequestId = None if rid is _MISSING else rid
    if msg.get("jsonrpc") != "2.0":
        raise EnvelopeError(InvalidRequest('Invalid request: jsonrpc must be "2.0"'), echo)
    method = msg.get("method")
    if not isinstance(method, str) or not method:
        raise EnvelopeError(InvalidRequest("Invalid request: method must be a string"), echo)
    params = msg.get("params")
    if "params" in msg and not isinstance(params, dict | list):
        raise EnvelopeError(InvalidRequest("Invalid request: params must be an object"), echo)
    # By-position params are refused per method (-32602), after the read-only and
    # capability checks, which do not depend on params.
    return Request(id=echo, method=method, params=params, notification=rid is _MISSING)


def error_body(request_id: RequestId, error: A2MError) -> bytes:
    err: dict[str, Any] = {"code": int(error.code), "message": error.message}
    if error.data is not None:
        err["data"] = error.data
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": err})


def result_body(request_id: RequestId, result: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


Dispatch = Callable[[str, Any], Awaitable[Any]]


async def handle_message(raw: bytes | str, dispatch: Dispatch) -> bytes | None:
    """One message in, one response out (None for a notification).

    Never raises: every failure is a JSON-RPC error object.
    """
    try:
        request = parse_request(raw)
    except EnvelopeError as exc:
        return error_body(exc.request_id, exc.error)
    if request.notification:
        # A read-only server has nothing a notification could change, and it gets no reply.
        return None
    try:
        result = await dispatch(request.method, request.params)
    except A2MError as exc:
        return error_body(request.id, exc)
    except Exception:  # a dispatcher bug: the dispatcher maps every known failure
        log.exception("unhandled error")
        return error_body(request.id, InternalError())
    return result_body(request.id, result)
