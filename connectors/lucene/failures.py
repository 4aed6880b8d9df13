"""How an Elasticsearch/OpenSearch answer or client error is read: failures and their kind.

:class:`EngineFailure` is what a failed engine call was (its status and root causes),
and the one place it becomes a neutral :mod:`connectors.errors` error (fixed messages,
no hosts or credentials). The helpers read what an answer itself says went wrong: lost
shards, an ``_msearch`` leg's failure, a busy node's ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

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
from connectors.http_answer import NOT_VALID_JSON, BadResponse, foreign_status

_TRANSIENT_STATUS = frozenset({408, 429, 502, 503, 504})
_PROTOCOL_STATUS = frozenset({405, 406, 407, 411, 415, 421, 426, 505})
"""Statuses that say the HTTP exchange itself went wrong (a proxy, a wrong port), never
that the engine refused the caller's query: no engine sends them to the gateway's calls."""
_TOO_LARGE = frozenset({"too_many_clauses", "too_many_nested_clauses"})
"""Root causes that mean the query itself is too large, whatever the status."""
_NODE_LOST = frozenset(
    {
        "node_disconnected_exception",
        "node_not_connected_exception",
        "node_closed_exception",
        "connect_transport_exception",
        "send_request_transport_exception",
        "no_shard_available_action_exception",
    }
)
"""Causes of a 5xx that a node leaving the cluster gives while the search ran on it: the
copies elsewhere answer a second attempt (a cluster losing a node answers 500 with these)."""


@dataclass(frozen=True, slots=True)
class EngineFailure:
    """A client exception reduced to what the connector decides on."""

    kind: Literal["connection", "timeout", "status", "answer"]
    status: int | None = None
    retry_after_ms: int | None = None
    causes: frozenset[str] = frozenset()
    """The error types the engine named (``error.type``, ``root_cause``, ``caused_by``)."""
    reason: str = ""
    """For an ``answer`` failure: what came back instead, in one sentence (no host)."""
    retryable: bool = True
    """For an ``answer`` failure: asking again can help."""

    @property
    def too_large(self) -> bool:
        return bool(self.causes & _TOO_LARGE)

    @property
    def transient(self) -> bool:
        """Worth retrying: the engine was unreachable, said 'busy', or lost a node while it
        searched. Timeouts are not retried: the deadline is mostly spent by then; nor is a
        query too large."""
        if self.too_large:
            return False
        if self.kind == "answer":
            return self.retryable
        if self.kind == "connection" or self.status in _TRANSIENT_STATUS:
            return True
        return (self.status or 0) >= 500 and bool(self.causes & _NODE_LOST)

    def error(self, *, opening: bool = False) -> ConnectorError:
        """The engine-neutral exception; fixed messages, no hosts or credentials."""
        retry_after = self.retry_after_ms if self.retry_after_ms is not None else 1000
        if self.kind == "timeout":
            return EngineTimeout("the engine did not answer in time")
        if self.kind == "connection":
            return EngineUnavailable("the engine cannot be reached", retry_after_ms=retry_after)
        if self.kind == "answer":
            if self.retryable:
                return EngineAnswerInvalid(self.reason, retry_after_ms=retry_after)
            return EngineAnswerUnusable(self.reason)
        if self.too_large:
            return QueryTooLarge("the engine refused the query as too large")
        status = self.status or 0
        if status == 408:
            return EngineUnavailable("the engine timed the request out", retry_after_ms=retry_after)
        if status in _PROTOCOL_STATUS:
            return EngineAnswerInvalid(foreign_status(status), retry_after_ms=retry_after)
        if status == 429:
            return EngineUnavailable("the engine is overloaded", retry_after_ms=retry_after)
        if status >= 500:
            return EngineUnavailable(
                f"the engine failed (HTTP {status})", retry_after_ms=retry_after
            )
        if status == 404 and not self.causes:
            # An engine names its 404 (index_not_found_exception); a bare one is another server.
            return EngineConfigError(
                "connection.hosts: the address answered HTTP 404 without an engine's error "
                "body; it is not an Elasticsearch or OpenSearch node (check the URL and port)"
            )
        if status == 404:
            return EngineConfigError("index: the index does not exist in the engine")
        if status in (401, 403):
            if opening:
                return EngineConfigError(
                    "connection: the engine refused the credentials, or they lack the "
                    "read and view_index_metadata privileges on the index"
                )
            return EngineRejected(f"the engine refused the credentials (HTTP {status})")
        return EngineRejected(f"the engine rejected the query (HTTP {status})")


def answer_failure(exc: BaseException, depth: int = 0) -> EngineFailure | None:
    """The failure of an answer that was not what the call asked for, when ``exc`` (a
    client's connection error) is or wraps a :class:`BadResponse`: elastic-transport keeps
    what it wraps in ``errors`` or ``bad_response`` (the gateway's node), opensearch-py in
    ``info``."""
    if isinstance(exc, BadResponse):
        return EngineFailure(
            "answer",
            reason=str(exc),
            retryable=exc.retryable,
            retry_after_ms=exc.retry_after_ms,
        )
    if depth > 4:
        return None
    inner = getattr(exc, "errors", None)
    wrapped = [*inner] if isinstance(inner, tuple | list) else []
    wrapped += [getattr(exc, "info", None), getattr(exc, "bad_response", None)]
    for e in wrapped:
        if isinstance(e, BaseException) and e is not exc:
            found = answer_failure(e, depth + 1)
            if found is not None:
                return found
    return None


NOT_JSON = EngineFailure("answer", reason=NOT_VALID_JSON)


def error_causes(body: Any) -> frozenset[str]:
    """The error types in an engine's error body: its type, root causes and causes, nested."""
    out: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > 8:
            return
        if isinstance(node.get("type"), str):
            out.add(node["type"])
        for cause in node.get("root_cause") or []:
            walk(cause, depth + 1)
        walk(node.get("caused_by"), depth + 1)
        for failed in node.get("failed_shards") or []:
            walk(failed.get("reason") if isinstance(failed, Mapping) else None, depth + 1)

    if isinstance(body, Mapping):
        walk(body.get("error"), 0)
    return frozenset(out)


class LegFailed(Exception):
    """One search of an ``_msearch`` failed (the others may have answered)."""

    def __init__(self, failure: EngineFailure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


def lost_shards(answer: Mapping[str, Any]) -> EngineFailure | None:
    """The failure a search answer stands for when shards failed because a node left.

    Such an answer is 200 with fewer hits than the index holds (a copy on the lost node
    was being read); another attempt reads the other copy. Shard failures of any other
    cause are the engine's answer and stay as they are.
    """
    shards = answer.get("_shards")
    # A decoded body's objects are dicts; isinstance on the Mapping ABC would cost more than
    # the rest of this check on every answer.
    if type(shards) is not dict or not shards.get("failed"):
        return None
    causes: set[str] = set()
    for failed in shards.get("failures") or []:
        reason = failed.get("reason") if isinstance(failed, Mapping) else None
        causes |= error_causes({"error": reason})
    if not causes & _NODE_LOST:
        return None
    return EngineFailure("status", status=500, causes=frozenset(causes))


def msearch_responses(answer: Mapping[str, Any], expected: int) -> list[dict[str, Any]]:
    """The per-search answers of an ``_msearch``, in order.

    Raises:
        LegFailed: a search failed (its status and causes, as one failed ``_search``),
            or the engine answered a different number of searches.
    """
    responses = answer.get("responses")
    if not isinstance(responses, list) or len(responses) != expected:
        raise LegFailed(EngineFailure("status", status=502))
    for r in responses:
        if not isinstance(r, Mapping) or "error" in r:
            status = r.get("status") if isinstance(r, Mapping) else None
            failure = EngineFailure(
                "status",
                status=status if isinstance(status, int) else 500,
                causes=error_causes(r),
            )
            raise LegFailed(failure)
        lost = lost_shards(r)
        if lost is not None:
            raise LegFailed(lost)
    return [dict(r) for r in responses]


NOT_AN_OBJECT = "the engine answered JSON that is not an object"
"""A JSON answer (a list, a string, null) to a call every engine answers with an object."""
NOT_A_SEARCH_ANSWER = "the engine's answer to a search holds no list of hits"
"""A JSON answer to ``_search`` without ``hits.hits`` (a proxy's or another service's)."""
NOT_A_HIT = (
    "the engine's answer to a search holds a hit without an _id or with a _source "
    "that is not an object"
)
"""A ``hits.hits`` entry no engine sends."""


def search_hits(answer: Any) -> list[Any]:
    """The ``hits.hits`` list of a ``_search`` answer (its entries unchecked).

    Raises:
        EngineAnswerUnusable: the answer holds no such list.
    """
    hits = answer.get("hits") if isinstance(answer, Mapping) else None
    listed = hits.get("hits") if isinstance(hits, Mapping) else None
    if not isinstance(listed, list):
        raise EngineAnswerUnusable(NOT_A_SEARCH_ANSWER)
    return listed
