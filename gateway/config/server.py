"""The HTTP server's settings: bind, limits, logging, authentication, rate limit, MCP."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from gateway.config.auth import AuthConfig
from gateway.config.base import StrictModel


class SharedQuotaConfig(StrictModel):
    """``rate_limit.redis``: the buckets in one Redis (or Valkey) that every replica shares.

    The password is its own key, given as ``${ENV}`` or ``${file:/path}``: never in
    the URL, which may be printed where a secret must not be.
    """

    url: str = Field(
        pattern=r"^rediss?://[^\s/?#]+(/\d+)?$",
        description="redis://host:port/db, or rediss:// for TLS; no password in it",
    )
    username: str | None = Field(default=None, min_length=1, description="Redis 6+ ACL user")
    password: SecretStr | None = Field(default=None, description="${ENV} or ${file:/path}")
    ca_certs: str | None = Field(default=None, description="CA bundle for rediss://")
    key_prefix: str = Field(default="a2m:rl:", max_length=200)
    timeout_ms: int = Field(
        default=100, gt=0, le=10_000, description="deadline of one bucket update, connect included"
    )
    on_error: Literal["local", "open", "closed"] = Field(
        default="local",
        description="Redis unreachable or late: each replica's own bucket (local), allow "
        "(open), or refuse with -32006 (closed)",
    )
    retry_after_ms: int = Field(
        default=1000, gt=0, description="after a failure, Redis is not asked again for this long"
    )
    max_connections: int = Field(default=32, gt=0, le=1024)

    @model_validator(mode="after")
    def _no_inline_password(self) -> SharedQuotaConfig:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(self.url)
            parts.port  # noqa: B018 (parses the port: a bad one raises here, not at first call)
        except ValueError:
            raise ValueError("rate_limit.redis.url: not a valid redis:// URL") from None
        if parts.password is not None:
            raise ValueError(
                "rate_limit.redis.url must not hold a password: set rate_limit.redis.password "
                "to ${ENV_VAR} or ${file:/path}"
            )
        if parts.username and self.username:
            raise ValueError("rate_limit.redis: a user in the url or in username, not both")
        if self.ca_certs is not None and parts.scheme != "rediss":
            raise ValueError("rate_limit.redis.ca_certs applies to rediss:// only")
        return self


class RateLimitConfig(StrictModel):
    """A token bucket per principal; an empty bucket answers -32006 QUOTA_EXCEEDED."""

    requests_per_second: float = Field(gt=0)
    burst: int = Field(default=20, gt=0, description="bucket size: calls allowed at once")
    max_principals: int = Field(
        default=10_000, gt=0, description="buckets kept in memory; the least recent is dropped"
    )
    backend: Literal["memory", "redis"] = Field(
        default="memory",
        description="memory: a bucket per process; redis: one per principal for all replicas",
    )
    redis: SharedQuotaConfig | None = None

    @model_validator(mode="after")
    def _backend_settings(self) -> RateLimitConfig:
        if self.backend == "redis" and self.redis is None:
            raise ValueError("rate_limit.backend redis needs rate_limit.redis.url")
        if self.backend == "memory" and self.redis is not None:
            raise ValueError("rate_limit.redis applies to backend redis only")
        return self


class AuditConfig(StrictModel):
    log_queries: bool = Field(
        default=False, description="put recall query text on the audit line (off: may be PII)"
    )


class HttpLimits(StrictModel):
    """What one client may hold of the HTTP server before any credential is checked."""

    header_timeout_ms: int = Field(
        default=10_000, gt=0, description="a request's headers must arrive within this"
    )
    keep_alive_s: float = Field(default=5.0, gt=0, description="an idle kept-alive connection")
    max_connections: int = Field(
        default=1000, gt=0, description="beyond this, requests are answered 503"
    )
    max_header_bytes: int = Field(default=16_384, ge=1024, description="request line + headers")
    protocol: Literal["httptools", "h11"] = Field(
        default="httptools",
        description="uvicorn's HTTP/1.1 parser: httptools (fast, C) or h11 (pure Python)",
    )
    max_inflight_body_bytes: int = Field(
        default=64 * 1_048_576,
        gt=0,
        description="request bodies buffered at once, all clients together (else 503)",
    )


class McpConfig(StrictModel):
    """The MCP front door (docs/mcp.md): `/mcp` and `/mcp/<store>` on the HTTP port."""

    enabled: bool = True
    max_output_chars: int = Field(
        default=20_000,
        ge=1_000,
        le=1_000_000,
        description="budget of one tool result's text; lowest-ranked results are dropped first",
    )
    snippet_chars: int = Field(default=300, ge=40, le=10_000)
    text_format: Literal["compact", "json"] = Field(
        default="compact",
        description="the text block: a compact cited listing, or the structured result as JSON",
    )
    resource: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s#]+$",
        description="public URL of /mcp: the RFC 9728 `resource`; enables audience_check",
    )
    authorization_servers: list[str] = Field(
        default_factory=list, description="RFC 9728; default: server.auth.jwt.issuer"
    )
    audience_check: bool = Field(
        default=False, description="RFC 8707: a JWT on /mcp must name `resource` in `aud`"
    )
    scopes_supported: list[str] = Field(
        default_factory=list,
        description="RFC 9728 `scopes_supported`: the scopes an MCP client asks for (else the "
        "SDKs ask for every scope the authorization server lists, which Keycloak refuses)",
    )

    @model_validator(mode="after")
    def _audience_needs_resource(self) -> McpConfig:
        if self.audience_check and self.resource is None:
            raise ValueError("mcp.audience_check needs mcp.resource (the URL tokens must name)")
        return self


class ServerConfig(StrictModel):
    name: str = "a2m-gateway"
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    allowed_origins: list[str] = Field(default_factory=list)
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header values served (a name, or '*.domain'); empty: the loopback "
        "names on a loopback bind (DNS rebinding), any host otherwise",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses whose X-Forwarded-For is believed; empty: never",
    )
    http: HttpLimits = Field(default_factory=HttpLimits)
    max_body_bytes: int = Field(default=1_048_576, gt=0)
    body_timeout_ms: int = Field(
        default=30_000, gt=0, description="a request body must arrive within this (else 408)"
    )
    request_timeout_ms: int = Field(default=10_000, gt=0)
    shutdown_grace_s: float = Field(default=20, ge=0)
    log_format: Literal["json", "text"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    auth: AuthConfig = Field(default_factory=AuthConfig)
    rate_limit: RateLimitConfig | None = None
    audit: AuditConfig = Field(default_factory=AuditConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    try_page: bool = Field(
        default=True,
        description="serve the try page at /try (and to browsers at /): a form over the same "
        "endpoints, admitted as any other call; false: no page, no preview route",
    )

    @model_validator(mode="after")
    def _one_body_fits(self) -> ServerConfig:
        if self.http.max_inflight_body_bytes < self.max_body_bytes:
            raise ValueError("server.http.max_inflight_body_bytes must be >= max_body_bytes")
        return self
