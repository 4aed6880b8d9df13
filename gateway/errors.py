"""Every error code the gateway can put on the wire, and the exceptions that carry them.

Ranges:
  -32700..-32600  JSON-RPC 2.0 standard errors.
  -32001..-32007  A2M 0.1 (fixed by the draft, or assigned in shared/spec/DECISIONS.md §1).
  -32050..-32099  this gateway's own: the search engine behind a store.

Exception tree (all raise through one boundary, :func:`gateway.jsonrpc.error_response`):

  A2MError(code, message, data)
   ├─ ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError
   ├─ UnknownTier, EmbeddingMismatch, CapabilityNotSupported, ReadOnly,
   │  QuotaExceeded, ScopeDenied, ProtocolNotSupported
   └─ BackendUnavailable, BackendTimeout

``message`` is for humans and never carries a hostname, credential, index
internal or stack trace; ``data`` may carry structured detail.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    """The body is not JSON."""
    INVALID_REQUEST = -32600
    """Not a JSON-RPC 2.0 request object; any array (batches are refused, §8)."""
    METHOD_NOT_FOUND = -32601
    """A method no capability of the draft defines."""
    INVALID_PARAMS = -32602
    """Params of the wrong type or shape, a missing required param, a limit beyond `limits`."""
    INTERNAL_ERROR = -32603
    """A bug. Never carries a stack trace or a backend address."""

    UNKNOWN_TIER = -32001
    """A tier the store does not have."""
    EMBEDDING_MISMATCH = -32002
    """A query vector whose width disagrees with the store's."""
    CAPABILITY_NOT_SUPPORTED = -32003
    """A method or param of a capability this server did not declare."""
    READ_ONLY = -32004
    """A write to a read-only server (remember, forget, summarize)."""
    QUOTA_EXCEEDED = -32005
    """A rate or size quota of the caller was exceeded."""
    SCOPE_DENIED = -32006
    """The caller asked for a scope its credential does not grant."""
    PROTOCOL_NOT_SUPPORTED = -32007
    """A protocol version this server does not speak."""

    BACKEND_UNAVAILABLE = -32050
    """The engine cannot be reached or answers 5xx after retries; data carries retry_after_ms."""
    BACKEND_TIMEOUT = -32051
    """The engine did not answer within the request's deadline."""


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


class UnknownTier(A2MError):
    code = ErrorCode.UNKNOWN_TIER
    default_message = "Unknown tier"


class EmbeddingMismatch(A2MError):
    code = ErrorCode.EMBEDDING_MISMATCH
    default_message = "Embedding width does not match the store"


class CapabilityNotSupported(A2MError):
    code = ErrorCode.CAPABILITY_NOT_SUPPORTED
    default_message = "Capability not supported"


class ReadOnly(A2MError):
    code = ErrorCode.READ_ONLY
    default_message = "This store is read-only"


class QuotaExceeded(A2MError):
    code = ErrorCode.QUOTA_EXCEEDED
    default_message = "Quota exceeded"


class ScopeDenied(A2MError):
    code = ErrorCode.SCOPE_DENIED
    default_message = "Scope denied"


class ProtocolNotSupported(A2MError):
    code = ErrorCode.PROTOCOL_NOT_SUPPORTED
    default_message = "Protocol version not supported"


class BackendUnavailable(A2MError):
    code = ErrorCode.BACKEND_UNAVAILABLE
    default_message = "The search engine behind this store is unavailable"


class BackendTimeout(A2MError):
    code = ErrorCode.BACKEND_TIMEOUT
    default_message = "The search engine did not answer in time"


DOCUMENTED_CODES = frozenset(int(c) for c in ErrorCode)
