"""The one exception-to-wire boundary: any exception becomes an A2MError.

:func:`engine_trouble` is the one classification of engine trouble (unreachable,
past the deadline, refused by the store's guard); the wire mapping and a
federation's partial-failure policy both read it.
"""

from __future__ import annotations

import logging

from connectors.errors import (
    ConnectorError,
    EngineAnswerInvalid,
    EngineAnswerUnusable,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    QueryTooLarge,
)
from gateway.a2m.errors import (
    A2MError,
    BackendOverloaded,
    BackendTimeout,
    BackendUnavailable,
    CircuitOpenError,
    EngineTrouble,
    EngineTroubleError,
    InternalError,
    InvalidParams,
)
from gateway.embedders import EmbedderUnavailable
from gateway.resilience import GuardRefusal

log = logging.getLogger(__name__)

_REFUSALS: dict[str, type[EngineTroubleError]] = {
    EngineTrouble.CIRCUIT_OPEN.value: CircuitOpenError,
    EngineTrouble.OVERLOADED.value: BackendOverloaded,
}


def engine_trouble(exc: BaseException) -> EngineTroubleError | None:
    """The retryable engine-trouble error `exc` is, or None when it is no such trouble."""
    if isinstance(exc, GuardRefusal):
        return _REFUSALS.get(exc.reason, BackendUnavailable)(retry_after_ms=exc.retry_after_ms)
    if isinstance(exc, EngineUnavailable):
        return BackendUnavailable(retry_after_ms=exc.retry_after_ms)
    if isinstance(exc, EngineTimeout):
        return BackendTimeout()
    if isinstance(exc, EmbedderUnavailable) and exc.retryable:
        return BackendUnavailable(retry_after_ms=exc.retry_after_ms)
    return None


def to_a2m_error(exc: BaseException) -> A2MError:
    """Any exception as the A2MError the wire carries.

    Engine trouble (unreachable, failing after retries, past the deadline, its
    breaker open, its calls shed) is a retryable -32603 with `data.reason`; a
    deterministic refusal of the query is -32602, not retryable (docs/protocol.md).
    Anything unexpected is logged here with its traceback and leaves as a bare
    INTERNAL_ERROR.
    """
    if isinstance(exc, A2MError):
        return exc
    if isinstance(exc, EngineAnswerInvalid | EngineAnswerUnusable):
        # The message says what came back instead (a login page, a redirect), never a host.
        log.warning("the engine's answer was not usable: %s", exc)
    trouble = engine_trouble(exc)
    if trouble is not None:
        return trouble
    if isinstance(exc, EmbedderUnavailable):
        # A refusal (a bad key, a model that cannot load) will not heal by retrying.
        log.error("query embedder refused: %s", exc)
        return InternalError(
            "The store's query embedder refused the request",
            data={"reason": "embedder_refused", "retryable": False},
        )
    if isinstance(exc, QueryTooLarge):
        return InvalidParams(
            "The query is too large for the search engine "
            "(too many terms, or a key_prefix over 1000 characters)",
            data={"reason": "query_too_large", "retryable": False},
        )
    if isinstance(exc, EngineRejected):
        log.error("engine refused a query: %s", type(exc).__name__)
        return InvalidParams("The search engine refused this query", data={"retryable": False})
    if isinstance(exc, EngineConfigError):
        # Connector messages are fixed strings naming the config key, never a host.
        log.error("store unusable: %s", exc)
        return InternalError(
            "The store's index is missing or does not match its configuration",
            data={"reason": "index_unusable", "retryable": False},
        )
    if isinstance(exc, EngineAnswerUnusable):
        return InternalError(
            "The search engine's answer could not be used",
            data={"reason": "engine_answer_unusable", "retryable": False},
        )
    if isinstance(exc, ConnectorError):
        return BackendUnavailable()
    log.exception("unhandled error", exc_info=exc)
    return InternalError()
