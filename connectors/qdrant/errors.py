"""Qdrant client exceptions -> the connector's neutral errors, in one context manager.

An answer that is not Qdrant's (refused by :mod:`connectors.qdrant.answers`, or a body
declared JSON that does not parse) becomes :class:`EngineAnswerInvalid` saying what came
back, retried as an unreachable server is; JSON qdrant-client cannot read as the answer
it asked for becomes :class:`EngineAnswerUnusable`. Neither is blamed on the caller.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from connectors.errors import (
    ConnectorError,
    EngineAnswerInvalid,
    EngineAnswerUnusable,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
)
from connectors.http_answer import NOT_VALID_JSON, BadResponse, retry_after_ms

if TYPE_CHECKING:
    from qdrant_client.http.exceptions import ResponseHandlingException

log = logging.getLogger("connectors.qdrant.connector")

_MISSING_COLLECTION: Final = "the qdrant collection named by index does not exist"
_BAD_CREDENTIALS: Final = (
    "qdrant refused the gateway's credentials (connection.api_key or connection.access_token)"
)
_NO_ACCESS: Final = (
    "the qdrant credentials do not grant access to the collection named by index "
    "(an access token for another collection, or an expired one)"
)
_MISSING_INDEX: Final = (
    "qdrant's strict mode refused a filter on a field without a payload index "
    "(`a2m-gateway check` lists the indexes the mapping needs)"
)
_UNTRUSTED_TLS: Final = (
    "the qdrant server's TLS certificate is not trusted "
    "(connection.ca_certs names the CA that signed it)"
)
NOT_QDRANTS_JSON: Final = (
    "the engine answered with JSON that is not the answer qdrant-client asked for "
    "(another server at connection.url, or a server much newer than the client?)"
)
_MISSING_INDEX_TEXT: Final = ("Index required but not found", "No range index for `order_by`")
"""How a Qdrant server says a payload index is missing (strict mode, order_by)."""

# gRPC status names (grpc.StatusCode members) -> the HTTP status Qdrant would have sent.
_GRPC_AS_HTTP: Final = {
    "UNAVAILABLE": 503,
    "RESOURCE_EXHAUSTED": 429,
    "INTERNAL": 500,
    "UNKNOWN": 500,
    "ABORTED": 503,
    "DEADLINE_EXCEEDED": 408,
    "CANCELLED": 408,
    "NOT_FOUND": 404,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
}


def _grpc_status(exc: BaseException) -> int | None:
    """A gRPC call's failure as the HTTP status a REST call would have had (400 for the rest)."""
    import grpc  # type: ignore[import-untyped]

    if not isinstance(exc, grpc.aio.AioRpcError | grpc.RpcError):
        return None
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    name = getattr(code, "name", "")
    return _GRPC_AS_HTTP.get(name, 400)


def _status(exc: BaseException) -> int | None:
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(exc, UnexpectedResponse):
        return exc.status_code
    return _grpc_status(exc)


def _server_text(exc: BaseException) -> str:
    """What the server said (REST body or gRPC details); for matching and debug logs only."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(exc, UnexpectedResponse):
        return exc.content[:2000].decode(errors="replace")
    details = getattr(exc, "details", None)
    return str(details() or "") if callable(details) else str(exc)


def untrusted_tls(exc: BaseException) -> bool:
    """The TLS handshake failed on the server's certificate: REST raises the ssl module's
    error under httpx's, gRPC says so in an UNAVAILABLE status's details."""
    seen: BaseException | None = exc
    for _ in range(8):  # the cause chain is short; a loop guard, not a depth to tune
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        if _grpc_status(seen) is not None:
            return "CERTIFICATE_VERIFY_FAILED" in _server_text(seen)
        source = getattr(seen, "source", None)
        seen = source if isinstance(source, BaseException) else (seen.__cause__ or seen.__context__)
    return False


def is_transient(exc: BaseException) -> bool:
    """Connection failures, 5xx and 429 (gRPC: unavailable, exhausted, internal) are worth
    another try; nothing else is (an untrusted certificate is the same on every try)."""
    import httpx
    from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
    from qdrant_client.http.exceptions import ResponseHandlingException

    if untrusted_tls(exc):
        return False
    refused = _bad_response(exc)
    if refused is not None:
        return refused.retryable
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return True  # a body declared JSON that is not: a proxy or node in a bad moment
    if isinstance(exc, ResourceExhaustedResponse):
        return True
    status = _status(exc)
    if status is not None:
        return status == 429 or status >= 500
    if isinstance(exc, ResponseHandlingException):
        exc = exc.source
    if isinstance(exc, httpx.ConnectTimeout):
        return True  # nothing answered the connect: the engine is not reachable
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)


def _bad_response(exc: BaseException) -> BadResponse | None:
    """The refusal of :mod:`connectors.qdrant.answers` that ``exc`` wraps (qdrant-client
    wraps what httpx raised in ``source``), if any."""
    from qdrant_client.http.exceptions import ResponseHandlingException

    if isinstance(exc, ResponseHandlingException):
        exc = exc.source
    return exc if isinstance(exc, BadResponse) else None


def asked_retry_after_s(exc: BaseException) -> float | None:
    """Retry-After in seconds of a 429/503 (REST: seconds or an HTTP-date; gRPC: whole
    seconds), or of a page the answer check refused (a proxy's busy page); None when
    none was sent."""
    from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(exc, ResourceExhaustedResponse):
        return float(max(0, exc.retry_after_s))
    refused = _bad_response(exc)
    asked = refused.retry_after_ms if refused is not None else None
    if isinstance(exc, UnexpectedResponse):
        asked = retry_after_ms(exc.headers)
    if asked is not None:
        return asked / 1000
    value: str | None = None
    if _grpc_status(exc) is not None:
        trailing = getattr(exc, "trailing_metadata", None)
        for key, item in (trailing() or ()) if callable(trailing) else ():
            if key == "retry-after":
                value = item if isinstance(item, str) else None
    if value is not None and value.strip().isdigit():
        return float(value.strip())
    return None


def _retry_after_ms(exc: BaseException) -> int:
    """Retry-After of a 429/503 as milliseconds; 1000 when absent."""
    asked = asked_retry_after_s(exc)
    return 1000 if asked is None else int(asked * 1000)


@contextmanager
def engine_errors() -> Iterator[None]:
    """Translate qdrant-client's exceptions into :mod:`connectors.errors` (the one boundary)."""
    import grpc
    import httpx
    from qdrant_client.common.client_exceptions import QdrantException
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    try:
        yield
    except ConnectorError:
        raise
    except TimeoutError as exc:
        raise EngineTimeout("qdrant did not answer in time") from exc
    except UnexpectedResponse as exc:
        raise _answered(exc, exc.status_code or 0) from exc
    except grpc.RpcError as exc:
        if untrusted_tls(exc):
            raise _untrusted(exc) from exc
        raise _answered(exc, _grpc_status(exc) or 400) from exc
    except QdrantException as exc:  # a 429 whose Retry-After the client parsed
        log.debug("qdrant answered 429: %s", exc)
        raise EngineUnavailable("qdrant is rate limiting", _retry_after_ms(exc)) from exc
    except ResponseHandlingException as exc:
        raise _unhandled(exc) from exc
    except httpx.TimeoutException as exc:
        raise EngineTimeout("qdrant did not answer in time") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        # qdrant-client parses a 200's body outside its own exception wrapping.
        log.debug("qdrant answer is not JSON: %r", exc)
        raise EngineAnswerInvalid(NOT_VALID_JSON) from exc
    except httpx.HTTPError as exc:
        log.debug("qdrant request failed: %r", exc)
        if untrusted_tls(exc):
            raise _untrusted(exc) from exc
        raise EngineUnavailable("qdrant cannot be reached") from exc
    except ValueError as exc:
        # qdrant-client raises ValueError for a request it cannot build.
        text = str(exc)
        log.debug("qdrant refused the request: %s", text)
        if text.startswith("Collection ") and text.endswith(" not found"):
            raise EngineConfigError(_MISSING_COLLECTION) from exc
        if "not found" in text or "does not exist" in text or "Not existing" in text:
            raise EngineConfigError(
                "a vector named by search.vector_field or search.sparse_vector "
                "is not in the collection"
            ) from exc
        raise EngineRejected("qdrant refused the request") from exc
    except RuntimeError as exc:  # qdrant-client used after close
        log.debug("qdrant client failed: %s", exc)
        raise EngineUnavailable("qdrant client is closed") from exc


def _unhandled(exc: ResponseHandlingException) -> ConnectorError:
    """The error for a request qdrant-client could not complete: what httpx or the answer
    check raised (its ``source``), or JSON of another shape than the answer."""
    import httpx

    source = exc.source
    log.debug("qdrant request failed: %r", source)
    if isinstance(source, BadResponse):
        return _not_qdrants(source)
    if untrusted_tls(exc):
        return _untrusted(exc)
    if is_transient(exc):
        return EngineUnavailable("qdrant cannot be reached")
    if isinstance(source, httpx.TimeoutException):
        return EngineTimeout("qdrant did not answer in time")
    if isinstance(source, httpx.HTTPError):
        return EngineUnavailable("qdrant cannot be reached")
    # Valid JSON of another shape (pydantic's ValidationError): not the caller's doing.
    return EngineAnswerUnusable(NOT_QDRANTS_JSON)


def _not_qdrants(refused: BadResponse) -> ConnectorError:
    """The error for an answer that is not Qdrant's; its message says what came back."""
    if refused.retryable:
        asked = refused.retry_after_ms
        return EngineAnswerInvalid(str(refused), 1000 if asked is None else asked)
    return EngineAnswerUnusable(str(refused))


def _untrusted(exc: BaseException) -> EngineConfigError:
    log.debug("qdrant TLS handshake failed: %r", exc)
    return EngineConfigError(_UNTRUSTED_TLS)


def _answered(exc: BaseException, status: int) -> ConnectorError:
    """The neutral error for a server's answer (REST status, or a gRPC code mapped to one)."""
    text = _server_text(exc)
    log.debug("qdrant answered %s: %s", status, text)
    if status == 429 or status >= 500:
        return EngineUnavailable(f"qdrant answered {status}", _retry_after_ms(exc))
    if status == 408:
        return EngineTimeout("qdrant timed out the request (server-side timeout)")
    if status == 404:
        return EngineConfigError(_MISSING_COLLECTION)
    if status == 401:
        return EngineConfigError(_BAD_CREDENTIALS)
    if status == 403:
        return EngineConfigError(_NO_ACCESS)
    if any(marker in text for marker in _MISSING_INDEX_TEXT):
        return EngineConfigError(_MISSING_INDEX)
    # Strict mode's limits on a caller's input (a limit, a filter too large) land here too.
    return EngineRejected(f"qdrant refused the request ({status})")
