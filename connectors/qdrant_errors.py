"""Qdrant client exceptions -> the connector's neutral errors, in one context manager."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from connectors.errors import (
    ConnectorError,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
)

log = logging.getLogger("connectors.qdrant")

_MISSING_COLLECTION: Final = "the qdrant collection named by index does not exist"


def _status(exc: BaseException) -> int | None:
    from qdrant_client.http.exceptions import UnexpectedResponse

    return exc.status_code if isinstance(exc, UnexpectedResponse) else None


def is_transient(exc: BaseException) -> bool:
    """Connection failures, 5xx and 429 are worth another try; nothing else is."""
    import httpx
    from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
    from qdrant_client.http.exceptions import ResponseHandlingException

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


def asked_retry_after_s(exc: BaseException) -> float | None:
    """Retry-After (whole seconds) of a 429/503, if Qdrant sent one (not a date)."""
    from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
    from qdrant_client.http.exceptions import UnexpectedResponse

    if isinstance(exc, ResourceExhaustedResponse):
        return float(max(0, exc.retry_after_s))
    if isinstance(exc, UnexpectedResponse):
        value = exc.headers.get("retry-after")
        if value is not None and value.strip().isdigit():
            return float(value.strip())
    return None


def _retry_after_ms(exc: BaseException) -> int:
    """Retry-After of a 429/503 as milliseconds; 1000 when absent or a date."""
    asked = asked_retry_after_s(exc)
    return 1000 if asked is None else int(asked * 1000)


@contextmanager
def engine_errors() -> Iterator[None]:
    """Translate qdrant-client's exceptions into :mod:`connectors.errors` (the one boundary)."""
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
        status = exc.status_code or 0
        log.debug("qdrant answered HTTP %s: %s", status, exc)
        if status == 429 or status >= 500:
            raise EngineUnavailable(f"qdrant answered HTTP {status}", _retry_after_ms(exc)) from exc
        if status == 404:
            raise EngineConfigError(_MISSING_COLLECTION) from exc
        if status in (401, 403):
            raise EngineConfigError("qdrant refused the gateway's credentials") from exc
        raise EngineRejected(f"qdrant refused the request (HTTP {status})") from exc
    except QdrantException as exc:  # a 429 whose Retry-After the client parsed
        log.debug("qdrant answered 429: %s", exc)
        raise EngineUnavailable("qdrant is rate limiting", _retry_after_ms(exc)) from exc
    except ResponseHandlingException as exc:
        source = exc.source
        log.debug("qdrant request failed: %r", source)
        if is_transient(exc):
            raise EngineUnavailable("qdrant cannot be reached") from exc
        if isinstance(source, httpx.TimeoutException):
            raise EngineTimeout("qdrant did not answer in time") from exc
        if isinstance(source, httpx.HTTPError):
            raise EngineUnavailable("qdrant cannot be reached") from exc
        raise EngineRejected("qdrant sent a response the client cannot read") from exc
    except httpx.TimeoutException as exc:
        raise EngineTimeout("qdrant did not answer in time") from exc
    except httpx.HTTPError as exc:
        log.debug("qdrant request failed: %r", exc)
        raise EngineUnavailable("qdrant cannot be reached") from exc
    except ValueError as exc:
        # Local mode raises ValueError where a server answers 4xx/404.
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
    except RuntimeError as exc:
        log.debug("qdrant local mode failed: %s", exc)
        raise EngineUnavailable("qdrant local mode is closed") from exc
    except ArithmeticError as exc:  # local mode computes scores with numpy in-process
        log.debug("qdrant local mode arithmetic failed: %s", exc)
        raise EngineRejected("qdrant could not score the query") from exc
