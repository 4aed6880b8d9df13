"""Every error code the gateway can put on the wire, and the exceptions that carry them.

The codes are A2M 0.1's closed list (canonical §7, restated in
docs/protocol.md); the protocol's schema allows no others, so this
gateway defines none of its own.

Ranges:
  -32700..-32600  JSON-RPC 2.0 standard errors.
  -32001..-32008  A2M 0.1.

Exception tree (engine and embedder failures become these at one boundary,
:func:`gateway.a2m.failures.to_a2m_error`):

  A2MError(code, message, data)
   ├─ ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError
   │   └─ InternalError: BackendUnavailable, BackendTimeout, CircuitOpenError,
   │      BackendOverloaded (engine trouble, retryable)
   └─ UnknownRecord, UnknownTier, CapabilityNotSupported, ReadOnly, ScopeDenied,
      QuotaExceeded, ProtocolNotSupported, EmbeddingMismatch

``message`` is for humans and never carries a hostname, credential, index
internal or stack trace; ``data`` may carry structured detail.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Any


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    """The body is not JSON."""
    INVALID_REQUEST = -32600
    """Not a JSON-RPC 2.0 request object; any array (batches are refused, §8)."""
    METHOD_NOT_FOUND = -32601
    """Not an A2M method at all."""
    INVALID_PARAMS = -32602
    """Params of the wrong type or shape, a missing required param, a limit beyond `limits`,
    or a query the engine deterministically refuses."""
    INTERNAL_ERROR = -32603
    """A server fault: a bug, or engine trouble (then data.reason and data.retryable say so)."""

    UNKNOWN_RECORD = -32001
    """A referenced id does not exist and the operation cannot ignore it."""
    UNKNOWN_TIER = -32002
    """A referenced tier does not exist."""
    CAPABILITY_NOT_SUPPORTED = -32003
    """A method or param of a capability this server did not declare (summarize included)."""
    READ_ONLY = -32004
    """A write (remember, forget) to this read-only server."""
    SCOPE_DENIED = -32005
    """The caller may not act on that owner's records."""
    QUOTA_EXCEEDED = -32006
    """A documented limit was exceeded, e.g. the caller's rate; data carries retry_after_ms."""
    PROTOCOL_NOT_SUPPORTED = -32007
    """The client declared an incompatible protocol version."""
    EMBEDDING_MISMATCH = -32008
    """A query vector whose width disagrees with the store's."""


class EngineTrouble(StrEnum):
    """`data.reason` of a retryable -32603 (docs/protocol.md)."""

    ENGINE_UNAVAILABLE = "engine_unavailable"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    CIRCUIT_OPEN = "circuit_open"
    """The store's breaker is open after repeated engine failures: the engine was not called."""
    OVERLOADED = "overloaded"
    """The store's engine calls in flight are at their bound: shed, the engine was not called."""


DEFAULT_RETRY_AFTER_MS = 1000


class A2MError(Exception):
    """An error that becomes a JSON-RPC error object on the wire."""

    code: ErrorCode = ErrorCode.INTERNAL_ERROR
    default_message = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.default_message
        self.data = data
        super().__init__(self.message)


class ParseError(A2MError):
    code = ErrorCode.PARSE_ERROR
    default_message = "Parse error: the message is not valid JSON"


class InvalidRequest(A2MError):
    code = ErrorCode.INVALID_REQUEST
    default_message = "Invalid request"


class MethodNotFound(A2MError):
    code = ErrorCode.METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParams(A2MError):
    code = ErrorCode.INVALID_PARAMS
    default_message = "Invalid params"


class InternalError(A2MError):
    code = ErrorCode.INTERNAL_ERROR
    default_message = "Internal error"


class UnknownRecord(A2MError):
    code = ErrorCode.UNKNOWN_RECORD
    default_message = "Unknown record"


class UnknownTier(A2MError):
    code = ErrorCode.UNKNOWN_TIER
    default_message = "Unknown tier"


class CapabilityNotSupported(A2MError):
    code = ErrorCode.CAPABILITY_NOT_SUPPORTED
    default_message = "Capability not supported"


class ReadOnly(A2MError):
    code = ErrorCode.READ_ONLY
    default_message = "This store is read-only"


class ScopeDenied(A2MError):
    code = ErrorCode.SCOPE_DENIED
    default_message = "Scope denied"


class QuotaExceeded(A2MError):
    code = ErrorCode.QUOTA_EXCEEDED
    default_message = "Quota exceeded"


class ProtocolNotSupported(A2MError):
    code = ErrorCode.PROTOCOL_NOT_SUPPORTED
    default_message = "Protocol version not supported"


class EmbeddingMismatch(A2MError):
    code = ErrorCode.EMBEDDING_MISMATCH
    default_message = "Embedding width does not match the store"


class EngineTroubleError(InternalError):
    """-32603 with `data: {reason, retryable: true, retry_after_ms}` (docs/protocol.md)."""

    reason: EngineTrouble = EngineTrouble.ENGINE_UNAVAILABLE

    def __init__(
        self,
        message: str | None = None,
        data: Any = None,
        *,
        retry_after_ms: int | None = None,
    ) -> None:
        extra = dict(data) if isinstance(data, dict) else {}
        wait = retry_after_ms if retry_after_ms is not None else extra.get("retry_after_ms")
        if not isinstance(wait, int) or isinstance(wait, bool) or wait < 0:
            wait = DEFAULT_RETRY_AFTER_MS
        extra.update(reason=self.reason.value, retryable=True, retry_after_ms=wait)
        super().__init__(message, extra)


class BackendUnavailable(EngineTroubleError):
    """The engine cannot be reached, or still fails (429/5xx) after bounded retries."""

    reason = EngineTrouble.ENGINE_UNAVAILABLE
    default_message = "The search engine behind this store is unavailable"


class BackendTimeout(EngineTroubleError):
    """The engine did not answer within the request's deadline."""

    reason = EngineTrouble.DEADLINE_EXCEEDED
    default_message = "The search engine did not answer in time"


class CircuitOpenError(EngineTroubleError):
    """The store's circuit breaker is open; retry_after_ms is the time until its probe."""

    reason = EngineTrouble.CIRCUIT_OPEN
    default_message = "The store's search engine keeps failing: its circuit breaker is open"


class BackendOverloaded(EngineTroubleError):
    """Too many engine calls in flight for this store: refused rather than queued."""

    reason = EngineTrouble.OVERLOADED
    default_message = "The store is overloaded; try again shortly"


DOCUMENTED_CODES = frozenset(int(c) for c in ErrorCode)
"""Every code the gateway can emit: exactly A2M 0.1's closed list."""
