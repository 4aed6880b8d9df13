"""Gateway configuration: one YAML file, one or more stores.

Secrets never sit in the file: any string value may be ``${NAME}`` (an
environment variable) or ``${file:/abs/path}`` (a mounted secret file, trailing
newline stripped). Expansion happens before validation, so errors name the
field, never the secret's value.
"""

from __future__ import annotations

import os
import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

_REF = re.compile(r"\$\{(?:(file):)?([^}]+)\}")
_STORE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


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

    @model_validator(mode="after")
    def _needs(self) -> EmbedderConfig:
        if self.kind is EmbedderKind.LOCAL and not self.model:
            raise ValueError("embedder.kind 'local' needs embedder.model")
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
    created_at: str | None = None
    updated_at: str | None = None
    metadata: list[str] = Field(default_factory=list)

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
    demo: DemoConfig | None = None

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
        return self

    @property
    def has_vectors(self) -> bool:
        return self.search.vector_field is not None or (
            self.backend is Backend.QDRANT and self.search.mode is not SearchMode.LEXICAL
        )


class ServerConfig(_Model):
    name: str = "a2m-gateway"
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    allowed_origins: list[str] = Field(default_factory=list)
    max_body_bytes: int = Field(default=1_048_576, gt=0)
    request_timeout_ms: int = Field(default=10_000, gt=0)
    shutdown_grace_s: float = Field(default=20, ge=0)
    log_format: Literal["json", "text"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"


StoreName = Annotated[str, Field(pattern=_STORE_NAME.pattern)]


class GatewayConfig(_Model):
    server: ServerConfig = Field(default_factory=ServerConfig)
    stores: dict[StoreName, StoreConfig]

    @field_validator("stores")
    @classmethod
    def _at_least_one(cls, v: dict[str, StoreConfig]) -> dict[str, StoreConfig]:
        if not v:
            raise ValueError("at least one store is required")
        return v

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
        kind, ref = m.group(1), m.group(2).strip()
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
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines)) from None
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
