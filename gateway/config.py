"""Gateway configuration: one YAML file, one or more stores.

Secrets never sit in the file: any string value may be ``${NAME}`` (an
environment variable) or ``${file:/abs/path}`` (a mounted secret file, trailing
newline stripped); ``$${`` writes a literal ``${``. Expansion, and the reading
of ``auth.api_keys_file``, happen in one load step around validation (no
validator does I/O), so errors name the field, never the secret's value.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.resilience.config import ResilienceConfig

# `$${` is a literal `${` (as in docker compose); anything else `${...}` is a reference.
_REF = re.compile(r"\$(\$)\{|\$\{(?:(file):)?([^}]+)\}")
_STORE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ConfigError(Exception):
    """The config file is missing, unreadable, or invalid; the message names the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Backend(StrEnum):
    ELASTICSEARCH = "elasticsearch"
    OPENSEARCH = "opensearch"
    QDRANT = "qdrant"


class SearchMode(StrEnum):
    LEXICAL = "lexical"
    """BM25 multi_match on Elasticsearch/OpenSearch; a sparse vector on Qdrant."""
    DENSE = "dense"
    """kNN on the vector field, the query embedded by the store's embedder."""
    HYBRID = "hybrid"
    """Lexical and dense fused by reciprocal rank fusion."""


class EmbedderKind(StrEnum):
    NONE = "none"
    LOCAL = "local"
    """A sentence-transformers model (torch): the ``local-embeddings`` extra."""
    MINILM = "minilm"
    """all-MiniLM-L6-v2 without torch or a download: the ``minilm`` extra."""
    OPENAI = "openai"


class EmbedderConfig(_Model):
    """How query text becomes a dense vector; must match how the corpus was embedded."""

    kind: EmbedderKind = EmbedderKind.NONE
    model: str | None = None
    url: str | None = Field(default=None, description="OpenAI-compatible base URL (…/v1)")
    api_key: SecretStr | None = None
    dimensions: int | None = Field(default=None, gt=0)
    timeout_ms: int = Field(default=5000, gt=0)
    normalize: bool = True
    weights: Literal["auto", "fp32", "int8"] = Field(
        default="auto", description="kind minilm: auto = fp32 when installed, else int8"
    )

    @model_validator(mode="after")
    def _needs(self) -> EmbedderConfig:
        if self.kind is EmbedderKind.LOCAL and not self.model:
            raise ValueError("embedder.kind 'local' needs embedder.model")
        if self.kind is EmbedderKind.MINILM:
            from gateway.embedders.minilm import DIMENSIONS, MODEL_ALIASES, missing_message

            if self.model is not None and self.model not in MODEL_ALIASES:
                raise ValueError("embedder.kind 'minilm' runs all-MiniLM-L6-v2 only")
            if self.dimensions is not None and self.dimensions != DIMENSIONS:
                raise ValueError(f"embedder.kind 'minilm' makes {DIMENSIONS} dimensions")
            if not self.normalize:
                raise ValueError("embedder.kind 'minilm' always normalises (as the model does)")
            # Checked here so `check` and `serve` stop at once with one line naming the extra.
            missing = missing_message(self.weights)
            if missing is not None:
                raise ValueError(missing)
        if self.kind is EmbedderKind.OPENAI and not (self.url and self.model):
            raise ValueError("embedder.kind 'openai' needs embedder.url and embedder.model")
        return self


class AwsSigV4(_Model):
    region: str
    service: Literal["es", "aoss"] = "es"


class ConnectionConfig(_Model):
    """How to reach the engine. Unused keys for a backend are refused by StoreConfig."""

    hosts: list[str] = Field(default_factory=list)
    cloud_id: SecretStr | None = None
    url: str | None = None
    path: str | None = Field(default=None, description="Qdrant local mode on disk")
    location: str | None = Field(default=None, description="Qdrant ':memory:' local mode")
    api_key: SecretStr | None = None
    username: str | None = None
    password: SecretStr | None = None
    bearer_token: SecretStr | None = None
    ca_certs: str | None = None
    verify_certs: bool = True
    aws_sigv4: AwsSigV4 | None = None
    timeout_ms: int = Field(default=10_000, gt=0)
    pool_maxsize: int = Field(default=32, gt=0)
    retries: int = Field(default=3, ge=0, le=10)

    @model_validator(mode="after")
    def _auth(self) -> ConnectionConfig:
        if self.password is not None and not self.username:
            raise ValueError("connection.password needs connection.username")
        modes = [
            self.api_key is not None,
            self.username is not None,
            self.bearer_token is not None,
            self.aws_sigv4 is not None,
        ]
        if sum(modes) > 1:
            raise ValueError(
                "connection: choose one of api_key, username/password, bearer_token, aws_sigv4"
            )
        return self


class MappingConfig(_Model):
    """Which document field becomes which A2M record field (dotted paths allowed)."""

    id: str = "_id"
    content: str | None = None
    content_template: str | None = Field(
        default=None, description="Python format string over fields, e.g. '{title}\\n\\n{text}'"
    )
    uri: str | None = None
    media_type: str | None = None
    media_type_value: str | None = None
    media_type_from_uri: bool = False
    key: str | None = None
    group: str | None = None
    role: str | None = None
    owner: str | None = Field(
        default=None,
        description="the record's owner; on local transports the caller's `owner` filters it",
    )
    created_at: str | None = None
    created_at_fallback: datetime = Field(
        default=EPOCH,
        description="the created_at of a record whose document has no date (RFC 3339; "
        "default the Unix epoch): every A2M record carries one",
    )
    updated_at: str | None = None
    metadata: list[str] = Field(default_factory=list)

    @field_validator("created_at_fallback")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

    def created_at_warning(self) -> str | None:
        """Why `check` should warn about created_at, if it should."""
        if self.created_at:
            return None
        return (
            "mapping.created_at is not set: every record carries created_at "
            f"{self.created_at_fallback.isoformat().replace('+00:00', 'Z')} "
            "(mapping.created_at_fallback), and timeline order is the engine's stable id or "
            "index order, not creation time"
        )

    @model_validator(mode="after")
    def _one_source(self) -> MappingConfig:
        if self.content and self.content_template:
            raise ValueError("mapping: set content or content_template, not both")
        if sum([bool(self.media_type), bool(self.media_type_value), self.media_type_from_uri]) > 1:
            raise ValueError(
                "mapping: set one of media_type, media_type_value, media_type_from_uri"
            )
        if self.media_type_from_uri and not self.uri:
            raise ValueError("mapping.media_type_from_uri needs mapping.uri")
        if self.content_template:
            try:
                template_fields(self.content_template)
            except ValueError as exc:
                raise ValueError(f"mapping.content_template: {exc}") from None
        return self

    def source_fields(self) -> list[str]:
        """Every engine field the mapping reads: the only fields fetched from the engine."""
        fields = [
            f
            for f in (
                self.content,
                self.uri,
                self.media_type,
                self.key,
                self.group,
                self.role,
                self.owner,
                self.created_at,
                self.updated_at,
            )
            if f
        ]
        if self.id != "_id":
            fields.append(self.id)
        if self.content_template:
            fields.extend(template_fields(self.content_template))
        fields.extend(self.metadata)
        return list(dict.fromkeys(fields))


def template_fields(template: str) -> list[str]:
    """Field names a content template reads; raises ValueError on a malformed template."""
    import string

    names: list[str] = []
    for _, name, spec, conv in string.Formatter().parse(template):
        if name is None:
            continue
        if not name or name.isdigit():
            raise ValueError("placeholders must name a field, e.g. {title}")
        if spec or conv:
            raise ValueError("format specs and conversions are not supported")
        names.append(name)
    if not names:
        raise ValueError("the template names no field")
    return names


class SearchConfig(_Model):
    mode: SearchMode = SearchMode.LEXICAL
    text_fields: list[str] = Field(default_factory=list, description="'field^boost' allowed")
    vector_field: str | None = None
    sparse_vector: str | None = Field(default=None, description="Qdrant named sparse vector")
    sparse_analyzer: Literal["light", "english"] = Field(
        default="light",
        description="how query text becomes sparse terms; must be the analyzer the collection "
        "was indexed with (gateway.embedders.lexical)",
    )
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    rrf_k: int = Field(default=60, gt=0)
    lexical_weight: float = Field(default=1.0, ge=0)
    dense_weight: float = Field(default=1.0, ge=0)
    candidates: int = Field(default=100, gt=0, le=10_000, description="per-leg depth for hybrid")
    collapse_group: bool = False
    highlight: bool = False
    highlight_fragment_size: int = Field(default=300, gt=0)


class LimitsConfig(_Model):
    max_recall_limit: int = Field(default=100, gt=0, le=10_000)
    default_recall_limit: int = Field(default=10, gt=0)
    default_timeline_limit: int = Field(default=100, gt=0)
    max_query_length: int = Field(default=4096, gt=0)
    max_where_keys: int = Field(default=16, gt=0)
    max_where_values: int = Field(default=100, gt=0)
    max_key_length: int = Field(default=1024, gt=0)
    max_prompt_budget: int = Field(default=100_000, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _defaults_follow_max(cls, data: Any) -> Any:
        # A lowered max_recall_limit lowers the defaults the operator did not set.
        if isinstance(data, dict) and isinstance(data.get("max_recall_limit"), int):
            top = data["max_recall_limit"]
            data = dict(data)
            data.setdefault("default_recall_limit", min(10, max(top, 1)))
            data.setdefault("default_timeline_limit", min(100, max(top, 1)))
        return data

    @model_validator(mode="after")
    def _defaults_within_max(self) -> LimitsConfig:
        if self.default_recall_limit > self.max_recall_limit:
            raise ValueError("limits.default_recall_limit exceeds limits.max_recall_limit")
        if self.default_timeline_limit > self.max_recall_limit:
            raise ValueError("limits.default_timeline_limit exceeds limits.max_recall_limit")
        return self


class ClaimSource(_Model):
    """Where a scope filter's values come from: one claim of the authenticated principal."""

    claim: str = Field(min_length=1, description="claim name; a dotted path reads nested claims")
    prefix: str = Field(default="", description="prepended to each value, e.g. 'user:'")


class ScopeFilter(_Model):
    """One engine field that must hold at least one of the principal's claim values."""

    field: str = Field(min_length=1, description="engine field (keyword); never returned")
    claims: list[ClaimSource] = Field(min_length=1)

    @field_validator("claims", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        # `claims: [groups]` is short for `claims: [{claim: groups}]`.
        if isinstance(v, list):
            return [{"claim": c} if isinstance(c, str) else c for c in v]
        return v

    @field_validator("field")
    @classmethod
    def _not_engine_id(cls, v: str) -> str:
        if v == "_id":
            raise ValueError("a scope filter cannot test the engine's document id")
        return v


class ScopeConfig(_Model):
    """Document-level security of one store (SECURITY.md).

    `filters` turn an authenticated principal's claims into conditions that every
    recall, timeline and fetch carries; conditions are ANDed, the values of one
    condition are any-of. `forward_credential` (Elasticsearch/OpenSearch) sends
    the caller's bearer token to the engine so the engine's own document
    security applies.
    """

    filters: list[ScopeFilter] = Field(default_factory=list)
    owner_claim: str = Field(
        default="sub", min_length=1, description="claim a body `owner` must equal over HTTP"
    )
    forward_credential: bool = False

    @property
    def enforced(self) -> bool:
        """The principal restricts what this store returns (so `scopes` is true over HTTP)."""
        return bool(self.filters) or self.forward_credential


class DemoConfig(_Model):
    """Marks the embedded demo store: indexed from the packaged corpus on first start."""

    corpus: Literal["packaged"] = "packaged"


class StoreConfig(_Model):
    backend: Backend
    index: str = Field(min_length=1, description="index (ES/OS) or collection (Qdrant)")
    description: str | None = None
    connection: ConnectionConfig = Field(default_factory=ConnectionConfig)
    mapping: MappingConfig = Field(default_factory=MappingConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    request_timeout_ms: int | None = Field(default=None, gt=0)
    scope: ScopeConfig = Field(default_factory=ScopeConfig)
    demo: DemoConfig | None = None
    resilience: ResilienceConfig = Field(default_factory=ResilienceConfig)

    @model_validator(mode="after")
    def _consistent(self) -> StoreConfig:
        c, s = self.connection, self.search
        if self.backend is Backend.QDRANT:
            targets = [bool(c.url), bool(c.path), bool(c.location)]
            if sum(targets) != 1:
                raise ValueError(
                    "connection: a qdrant store needs exactly one of url, path, location"
                )
            for name in ("hosts", "cloud_id", "username", "bearer_token", "aws_sigv4", "ca_certs"):
                if getattr(c, name):
                    raise ValueError(f"connection.{name} does not apply to backend qdrant")
            if s.mode in (SearchMode.LEXICAL, SearchMode.HYBRID) and not s.sparse_vector:
                raise ValueError(
                    f"search.sparse_vector is required for mode '{s.mode}' on qdrant "
                    "(lexical search on qdrant is a sparse vector)"
                )
            if s.text_fields:
                raise ValueError("search.text_fields does not apply to backend qdrant")
        else:
            if not (c.hosts or c.cloud_id):
                raise ValueError(f"connection: a {self.backend} store needs hosts or cloud_id")
            for name in ("url", "path", "location"):
                if getattr(c, name):
                    raise ValueError(f"connection.{name} does not apply to backend {self.backend}")
            if c.aws_sigv4 and self.backend is not Backend.OPENSEARCH:
                raise ValueError("connection.aws_sigv4 applies to backend opensearch only")
            if s.sparse_vector:
                raise ValueError(f"search.sparse_vector does not apply to backend {self.backend}")
            if s.mode in (SearchMode.LEXICAL, SearchMode.HYBRID) and not s.text_fields:
                raise ValueError(f"search.text_fields is required for mode '{s.mode}'")
        if s.mode in (SearchMode.DENSE, SearchMode.HYBRID):
            if not s.vector_field and self.backend is not Backend.QDRANT:
                raise ValueError(f"search.vector_field is required for mode '{s.mode}'")
            if s.embedder.kind is EmbedderKind.NONE:
                raise ValueError(
                    f"search.embedder is required for mode '{s.mode}': query text must be "
                    "embedded by the model the corpus was embedded with"
                )
        if not (self.mapping.content or self.mapping.content_template) and not self.mapping.uri:
            raise ValueError("mapping: a store needs content, content_template or uri")
        if self.demo and self.backend is not Backend.QDRANT:
            raise ValueError("demo applies to backend qdrant only")
        if self.scope.forward_credential and self.backend is Backend.QDRANT:
            raise ValueError(
                "scope.forward_credential applies to elasticsearch and opensearch only "
                "(qdrant has no per-user document security to forward to)"
            )
        return self

    @property
    def has_vectors(self) -> bool:
        return self.search.vector_field is not None or (
            self.backend is Backend.QDRANT and self.search.mode is not SearchMode.LEXICAL
        )


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


class ApiKeyEntry(_Model):
    """One static API key, held as a hash: the key itself never sits in a config file."""

    subject: str = Field(min_length=1, max_length=256, description="the principal (`sub`)")
    hash: str = Field(description="'sha256:<hex>' of the key; `a2m-gateway hash-key` prints it")
    claims: dict[str, Any] = Field(
        default_factory=dict, description="extra claims, e.g. {groups: [team-a]}"
    )

    @field_validator("hash")
    @classmethod
    def _hash_form(cls, v: str) -> str:
        v = v.strip().lower()
        if not _HASH.match(v):
            raise ValueError("must be 'sha256:' followed by 64 hex digits (a2m-gateway hash-key)")
        return v


JwtAlgorithm = Literal[
    "HS256",
    "HS384",
    "HS512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
]
"""Never `none`: an unsigned token is not a credential."""


class JwtConfig(_Model):
    """JWT bearer tokens, verified with PyJWT: signature, issuer, audience, exp, nbf."""

    issuer: str = Field(min_length=1)
    audience: list[str] = Field(min_length=1)
    algorithms: list[JwtAlgorithm] = Field(min_length=1)
    jwks_url: str | None = Field(default=None, description="https URL of the issuer's JWKS")
    jwks_file: str | None = Field(default=None, description="a JWKS JSON file (mounted)")
    secret: SecretStr | None = Field(default=None, description="HS* shared secret, >= 32 bytes")
    leeway_s: float = Field(default=30, ge=0, le=300, description="clock skew for exp/nbf/iat")
    jwks_cache_s: float = Field(default=300, gt=0)
    jwks_cooldown_s: float = Field(
        default=30, ge=0, description="minimum gap between refetches for an unknown kid"
    )
    jwks_timeout_ms: int = Field(default=5000, gt=0)
    subject_claim: str = Field(default="sub", min_length=1)
    max_token_bytes: int = Field(default=16_384, gt=0)

    @field_validator("audience", mode="before")
    @classmethod
    def _one_audience(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _keys(self) -> JwtConfig:
        hmac = {a for a in self.algorithms if a.startswith("HS")}
        if hmac and len(hmac) != len(self.algorithms):
            # One key source per issuer; mixing is how algorithm-confusion attacks start.
            raise ValueError("jwt.algorithms: do not mix HS* with asymmetric algorithms")
        if hmac:
            if self.secret is None:
                raise ValueError("jwt: HS* algorithms need jwt.secret")
            if self.jwks_url or self.jwks_file:
                raise ValueError("jwt: HS* algorithms take jwt.secret, not a JWKS")
            if len(self.secret.get_secret_value().encode()) < 32:
                raise ValueError("jwt.secret must be at least 32 bytes")
        else:
            if self.secret is not None:
                raise ValueError("jwt.secret applies to HS* algorithms only")
            if (self.jwks_url is None) == (self.jwks_file is None):
                raise ValueError("jwt: set exactly one of jwks_url, jwks_file")
            if self.jwks_url is not None:
                from urllib.parse import urlsplit

                url = urlsplit(self.jwks_url)
                if url.scheme != "https" and not (
                    url.scheme == "http" and is_loopback(url.hostname or "")
                ):
                    raise ValueError("jwt.jwks_url must be https (http only on loopback)")
        return self


class FailedAuthLimit(_Model):
    """A token bucket per client address charged by each failed authentication.

    An empty bucket answers 429 without a log line, so a flood of bad tokens
    costs neither a 401 nor an audit line each; valid credentials always pass.
    """

    per_second: float = Field(default=1.0, gt=0)
    burst: int = Field(default=20, gt=0)
    max_clients: int = Field(default=10_000, gt=0, description="addresses tracked (LRU)")


class AuthConfig(_Model):
    """Caller authentication over HTTP (A2M §6.1). stdio and in-process are local (§6)."""

    mode: Literal["none", "bearer"] = Field(
        default="none",
        description="bearer: every POST needs `Authorization: Bearer`; defaults to bearer "
        "as soon as api_keys, api_keys_file or jwt is set",
    )
    api_keys: list[ApiKeyEntry] = Field(default_factory=list)
    api_keys_file: str | None = Field(
        default=None, description="YAML/JSON list of api_keys entries (a mounted secret)"
    )
    jwt: JwtConfig | None = None
    allow_unauthenticated_network: bool = Field(
        default=False,
        description="escape hatch: mode none on a non-loopback bind (logged as a warning)",
    )
    realm: str = Field(default="a2m", pattern=r"^[A-Za-z0-9 ._-]{1,64}$")
    failures: FailedAuthLimit = Field(default_factory=FailedAuthLimit)
    _file_keys: list[ApiKeyEntry] = PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _infer_mode(cls, data: Any) -> Any:
        # Configuring a credential and forgetting `mode` must never leave the door open.
        if (
            isinstance(data, dict)
            and "mode" not in data
            and (data.get("api_keys") or data.get("api_keys_file") or data.get("jwt"))
        ):
            data = {**data, "mode": "bearer"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> AuthConfig:
        if self.mode == "none":
            if self.api_keys or self.api_keys_file or self.jwt:
                raise ValueError(
                    "auth.mode is none but credentials are configured; set mode: bearer"
                )
            return self
        if not (self.api_keys or self.api_keys_file or self.jwt):
            raise ValueError("auth.mode bearer needs api_keys, api_keys_file or jwt")
        self._unique_hashes()
        return self

    def _unique_hashes(self) -> None:
        hashes = [k.hash for k in self.all_api_keys()]
        if len(hashes) != len(set(hashes)):
            raise ValueError("auth.api_keys: the same key hash appears twice")

    def load_key_file(self) -> None:
        """Read api_keys_file (once, at load: rotating a key file means a restart).

        Raises:
            ValueError: unreadable, invalid, empty while nothing else is configured,
                or a hash that appears twice.
        """
        if self.mode == "none" or self.api_keys_file is None:
            return
        self._file_keys = _read_api_keys(self.api_keys_file)
        if not (self.api_keys or self._file_keys or self.jwt):
            raise ValueError("auth.mode bearer needs api_keys, api_keys_file or jwt")
        self._unique_hashes()

    @property
    def enabled(self) -> bool:
        return self.mode == "bearer"

    def all_api_keys(self) -> list[ApiKeyEntry]:
        """The inline keys and those of api_keys_file."""
        return [*self.api_keys, *self._file_keys]


def _read_api_keys(path: str) -> list[ApiKeyEntry]:
    """The entries of an API-key file; errors never quote its content.

    Raises:
        ValueError: unreadable, not a YAML list, or an entry is invalid.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        raise ValueError("auth.api_keys_file cannot be read as YAML/JSON") from None
    if not isinstance(data, list):
        raise ValueError("auth.api_keys_file must hold a list of {subject, hash, claims}")
    entries = []
    for i, item in enumerate(data):
        try:
            entries.append(ApiKeyEntry.model_validate(item))
        except ValidationError:
            raise ValueError(f"auth.api_keys_file: entry {i} is invalid") from None
    return entries


class RateLimitConfig(_Model):
    """A token bucket per principal; an empty bucket answers -32006 QUOTA_EXCEEDED."""

    requests_per_second: float = Field(gt=0)
    burst: int = Field(default=20, gt=0, description="bucket size: calls allowed at once")
    max_principals: int = Field(
        default=10_000, gt=0, description="buckets kept; the least recent is dropped"
    )


class AuditConfig(_Model):
    log_queries: bool = Field(
        default=False, description="put recall query text on the audit line (off: may be PII)"
    )


class HttpLimits(_Model):
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


class McpConfig(_Model):
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

    @model_validator(mode="after")
    def _audience_needs_resource(self) -> McpConfig:
        if self.audience_check and self.resource is None:
            raise ValueError("mcp.audience_check needs mcp.resource (the URL tokens must name)")
        return self


class ServerConfig(_Model):
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

    @model_validator(mode="after")
    def _one_body_fits(self) -> ServerConfig:
        if self.http.max_inflight_body_bytes < self.max_body_bytes:
            raise ValueError("server.http.max_inflight_body_bytes must be >= max_body_bytes")
        return self


StoreName = Annotated[str, Field(pattern=_STORE_NAME.pattern)]


class FederationMember(_Model):
    store: StoreName
    weight: float = Field(default=1.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        return {"store": v} if isinstance(v, str) else v


class FederationConfig(_Model):
    """Several stores answering as one (gateway.federation): fan-out, weighted RRF."""

    description: str | None = None
    members: list[FederationMember] = Field(min_length=1)
    deadline_ms: int | None = Field(
        default=None, gt=0, description="bounds every member's call; default server's timeout"
    )
    rrf_k: int = Field(default=60, gt=0)
    fusion: Literal["rrf", "score", "shards"] = Field(
        default="rrf",
        description=(
            "rrf: weighted reciprocal rank fusion; score: merge by weighted member score; "
            "shards: members hold disjoint parts of one corpus, ranked as one index"
        ),
    )

    @model_validator(mode="after")
    def _distinct(self) -> FederationConfig:
        names = [m.store for m in self.members]
        if len(set(names)) != len(names):
            raise ValueError("members: a store appears twice")
        return self


class GatewayConfig(_Model):
    server: ServerConfig = Field(default_factory=ServerConfig)
    stores: dict[StoreName, StoreConfig]
    federations: dict[StoreName, FederationConfig] = Field(default_factory=dict)

    @field_validator("stores")
    @classmethod
    def _at_least_one(cls, v: dict[str, StoreConfig]) -> dict[str, StoreConfig]:
        if not v:
            raise ValueError("at least one store is required")
        return v

    @model_validator(mode="after")
    def _federations_known(self) -> GatewayConfig:
        for name, fed in self.federations.items():
            if name in self.stores:
                raise ValueError(f"federations.{name}: a store has that name already")
            for m in fed.members:
                if m.store not in self.stores:
                    raise ValueError(f"federations.{name}: member {m.store!r} is not a store")
        return self

    @property
    def default_store(self) -> str:
        return next(iter(self.stores))


def _expand(value: Any, where: str) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return "${"
        kind, ref = m.group(2), m.group(3).strip()
        if kind == "file":
            try:
                return Path(ref).read_text(encoding="utf-8").rstrip("\r\n")
            except OSError:
                raise ConfigError(f"{where}: secret file {ref!r} cannot be read") from None
        if ref not in os.environ:
            raise ConfigError(f"{where}: environment variable {ref} is not set")
        return os.environ[ref]

    return _REF.sub(sub, value)


def parse_config(data: Any, base_dir: Path | None = None) -> GatewayConfig:
    """Validate an already-loaded YAML document.

    Raises:
        ConfigError: with a message that names each bad field, never a secret value.
    """
    if not isinstance(data, dict):
        raise ConfigError("config: the top level must be a mapping with 'stores'")
    expanded = _expand(data, "")
    try:
        cfg = GatewayConfig.model_validate(expanded)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False, include_input=False):
            loc = ".".join(str(p) for p in err["loc"]) or "config"
            lines.append(f"{loc}: {err['msg']}")
        if len(lines) == 1:  # one line on stderr: what is wrong and where
            raise ConfigError(f"invalid config: {lines[0]}") from None
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines)) from None
    try:
        cfg.server.auth.load_key_file()
    except ValueError as exc:
        raise ConfigError(f"invalid config:\n  server.auth: {exc}") from None
    if base_dir is not None:
        cfg = _resolve_paths(cfg, base_dir)
    return cfg


def _resolve_paths(cfg: GatewayConfig, base_dir: Path) -> GatewayConfig:
    """Relative Qdrant paths are relative to the config file, not the working directory."""
    stores = {}
    for name, store in cfg.stores.items():
        path = store.connection.path
        if path and not Path(path).is_absolute():
            conn = store.connection.model_copy(update={"path": str((base_dir / path).resolve())})
            store = store.model_copy(update={"connection": conn})
        stores[name] = store
    return cfg.model_copy(update={"stores": stores})


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a config file.

    Raises:
        ConfigError: the file is missing, is not YAML, or is invalid.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError:
        raise ConfigError(f"config file {str(p)!r} cannot be read") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {str(p)!r} is not valid YAML{where}") from None
    return parse_config(data, base_dir=p.parent)
