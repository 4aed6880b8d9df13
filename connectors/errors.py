"""Engine-neutral failures a connector may raise.

Each connector translates its client library's exceptions into these at its
boundary (``raise ... from exc``); the gateway maps them to wire codes in
``gateway.a2m.jsonrpc``. Messages are fixed strings: an engine exception's text can
name hosts, indices or credentials, so it is logged at debug level by the
connector and never copied here.
"""

from __future__ import annotations


class ConnectorError(Exception):
    """Base of every connector failure."""


class EngineUnavailable(ConnectorError):
    """The engine could not be reached, or answered 429/5xx after retries."""

    def __init__(self, message: str = "engine unavailable", retry_after_ms: int = 1000) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class EngineAnswerInvalid(EngineUnavailable):
    """The engine's address answered, but not with what the call asked for (a login
    page, a body that is not JSON, a redirect, a status no engine sends the call).

    The message says in one sentence what came back (never a host): a proxy or sign-on
    page in front of the engine, or a node in a bad moment. Retryable, as an engine
    that is down is: the store keeps trying.
    """


class EngineAnswerUnusable(ConnectorError):
    """The engine's answer cannot be used and asking again will not change that (it is
    past the store's size limits, or not an Elasticsearch answer at all); the message
    says what came back."""


class EngineTimeout(ConnectorError):
    """The engine did not answer within the request deadline."""


class EngineRejected(ConnectorError):
    """The engine refused the query (4xx): a translation bug or a mapping mismatch."""


class QueryTooLarge(EngineRejected):
    """The engine refused the query as too large (too many terms or clauses).

    Deterministic, whatever the HTTP status the engine chose (OpenSearch says
    500): never retried, and the caller's to fix (fewer terms).
    """


class EngineConfigError(ConnectorError):
    """The index/collection is missing or does not match the store's config."""


class LocalStorageLocked(EngineConfigError):
    """An engine's storage in this process is locked by another process (one process per
    storage: a qdrant-edge shard, say).

    Not transient the way an unreachable server is: retrying never helps while the
    other process runs, so the CLI reports it at start-up with :attr:`path`, which
    is the operator's own config value and is kept off the wire message.
    """

    def __init__(self, path: str, storage: str, why: str) -> None:
        """path: the operator's config value; storage: what is locked, in the engine's
        words (``qdrant storage``); why: why one process only, for the operator."""
        super().__init__(f"{storage} is locked by another process")
        self.path = path
        self.storage = storage
        self.why = why

    def for_operator(self) -> str:
        """The start-up line's reason: the path, and what to do (never on the wire)."""
        return (
            f"{self.storage} {self.path} is locked by another process "
            f"({self.why}); stop that process or give this store another connection.path"
        )
