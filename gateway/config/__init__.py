"""Gateway configuration: one YAML file, one or more stores (docs/configuration.md).

``load_config`` / ``parse_config`` (gateway.config.load) are the one load step:
references expanded, models validated (pure validators), files read. The
models live by concern: stores (one per engine, discriminated on ``backend``),
their connection, mapping and search keys, the server, auth, and federations. Each
engine's own store and search models are in ``gateway.config.engines``.
"""

from gateway.config.auth import ApiKeyEntry, AuthConfig, FailedAuthLimit, JwtAlgorithm, JwtConfig
from gateway.config.base import ConfigError, StrictModel, is_loopback
from gateway.config.document import GatewayConfig
from gateway.config.engines import StoreConfig, validate_store
from gateway.config.federation import (
    STORE_NAME,
    FederationConfig,
    FederationMember,
    StoreName,
)
from gateway.config.load import expand_references, load_config, parse_config, read_api_keys
from gateway.config.mapping import EPOCH, MappingConfig, template_fields
from gateway.config.search import (
    EmbedderConfig,
    EmbedderKind,
    SearchConfig,
    SearchMode,
)
from gateway.config.server import (
    AuditConfig,
    HttpLimits,
    McpConfig,
    RateLimitConfig,
    ServerConfig,
    SharedQuotaConfig,
)
from gateway.config.stores import (
    ClaimSource,
    ConnectionConfig,
    DemoConfig,
    LimitsConfig,
    ScopeConfig,
    ScopeFilter,
    StoreBase,
)

__all__ = [
    "EPOCH",
    "STORE_NAME",
    "ApiKeyEntry",
    "AuditConfig",
    "AuthConfig",
    "ClaimSource",
    "ConfigError",
    "ConnectionConfig",
    "DemoConfig",
    "EmbedderConfig",
    "EmbedderKind",
    "FailedAuthLimit",
    "FederationConfig",
    "FederationMember",
    "GatewayConfig",
    "HttpLimits",
    "JwtAlgorithm",
    "JwtConfig",
    "LimitsConfig",
    "MappingConfig",
    "McpConfig",
    "RateLimitConfig",
    "ScopeConfig",
    "ScopeFilter",
    "SearchConfig",
    "SearchMode",
    "ServerConfig",
    "SharedQuotaConfig",
    "StoreBase",
    "StoreConfig",
    "StoreName",
    "StrictModel",
    "expand_references",
    "is_loopback",
    "load_config",
    "parse_config",
    "read_api_keys",
    "template_fields",
    "validate_store",
]
