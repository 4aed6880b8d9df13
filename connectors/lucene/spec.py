"""How a Lucene connector reaches Elasticsearch or OpenSearch: plain, frozen values.

Built by the ``connection:`` models of :mod:`connectors.lucene.config`; read by the
dialects and :class:`connectors.lucene.client.LuceneClient`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from connectors.http_answer import AnswerLimits
from connectors.spec import ConnectionSpec, ConnectorSpec, Secret

DEFAULT_LIMITS = AnswerLimits()


@dataclass(frozen=True, slots=True)
class AwsSigV4:
    region: str
    service: Literal["es", "aoss"] = "es"


@dataclass(frozen=True, slots=True)
class LuceneConnectionSpec(ConnectionSpec):
    """HTTP nodes (or Elastic Cloud), TLS, one way to authenticate, sniffing, answer bounds."""

    hosts: tuple[str, ...] = ()
    cloud_id: Secret | None = None
    """Elasticsearch only."""
    api_key: Secret | None = None
    username: str | None = None
    password: Secret | None = None
    bearer_token: Secret | None = None
    ca_certs: str | None = None
    verify_certs: bool = True
    aws_sigv4: AwsSigV4 | None = None
    """OpenSearch only."""
    sniff: bool = False
    """Learn the cluster's nodes from the engine (at start, after a node fails, periodically)."""
    sniff_interval_ms: int = 60_000
    max_header_bytes: int = DEFAULT_LIMITS.header_bytes
    """Bounds on each engine answer: its status line and headers, its body as sent, and
    its body once decompressed."""
    max_body_bytes: int = DEFAULT_LIMITS.body_bytes
    max_decoded_bytes: int = DEFAULT_LIMITS.decoded_bytes

    @property
    def answer_limits(self) -> AnswerLimits:
        return AnswerLimits(self.max_header_bytes, self.max_body_bytes, self.max_decoded_bytes)

    @property
    def fails_over(self) -> bool:
        """More than one node may serve a request: a failed or hung one is left for another."""
        return len(self.hosts) > 1 or self.sniff


LuceneSpec = ConnectorSpec[LuceneConnectionSpec]
"""A Lucene store's connector spec."""
