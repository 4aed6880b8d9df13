"""What every store has, whatever its engine: :class:`StoreBase` and its parts.

Each engine's store model (``gateway.config.engines``) adds its own ``backend:``
value, ``connection:`` model and ``search:`` keys, taken from the engine registry
(:mod:`connectors.registry`). What every store shares (mapping, limits, scope, …)
lives here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from connectors.config import EngineConnection
from connectors.registry import engine, engines
from gateway.config.base import StrictModel
from gateway.config.mapping import MappingConfig
from gateway.config.search import SearchConfig
from gateway.resilience.config import ResilienceConfig

ConnectionConfig = EngineConnection
"""Any store's connection (a type for annotations; each store model holds its engine's)."""


class LimitsConfig(StrictModel):
    max_recall_limit: int = Field(default=100, gt=0, le=10_000)
    default_recall_limit: int = Field(default=10, gt=0)
    default_timeline_limit: int = Field(default=100, gt=0)
    max_query_length: int = Field(default=4096, gt=0)
    max_where_keys: int = Field(default=16, gt=0)
    max_where_values: int = Field(default=100, gt=0)
    max_key_length: int = Field(default=1024, gt=0)
    max_prompt_budget: int = Field(default=100_000, gt=0)
    max_where_candidates: int = Field(
        default=1_000,
        gt=0,
        le=10_000,
        description="the most of the engine's matches that one read checks against a"
        " `where` the engine only approximates (at least the read's limit)",
    )

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


class ClaimSource(StrictModel):
    """Where a scope filter's values come from: one claim of the authenticated principal."""

    claim: str = Field(min_length=1, description="claim name; a dotted path reads nested claims")
    prefix: str = Field(default="", description="prepended to each value, e.g. 'user:'")
    strip_prefix: str = Field(
        default="",
        description="only values starting with this count, without it: '/tenants/' reads "
        "Keycloak's group path '/tenants/A' as 'A' and ignores '/A' and '/other/A'",
    )


class ScopeFilter(StrictModel):
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


class ScopeConfig(StrictModel):
    """Document-level security of one store (SECURITY.md).

    `filters` turn an authenticated principal's claims into conditions that every
    recall, timeline and fetch carries; conditions are ANDed, the values of one
    condition are any-of. `forward_credential` (Elasticsearch/OpenSearch) sends
    the caller's bearer token to the engine so the engine's own document
    security applies.
    """

    filters: list[ScopeFilter] = Field(default_factory=list)
    allow: dict[str, list[str | int | bool]] = Field(
        default_factory=dict,
        description="who may use this store at all: claim name -> values; a principal holding "
        "one of the values of one of the claims may (empty: every caller that reaches it)",
    )
    owner_claim: str = Field(
        default="sub", min_length=1, description="claim a body `owner` must equal over HTTP"
    )
    forward_credential: bool = False

    @field_validator("allow")
    @classmethod
    def _allow_names_values(
        cls, v: dict[str, list[str | int | bool]]
    ) -> dict[str, list[str | int | bool]]:
        for claim, values in v.items():
            if not claim:
                raise ValueError("allow: a claim name must not be empty")
            if not values or any(value == "" for value in values):
                raise ValueError(f"allow.{claim}: list at least one non-empty value")
        return v

    @property
    def enforced(self) -> bool:
        """The principal restricts what this store returns (so `scopes` is true over HTTP)."""
        return bool(self.filters) or self.forward_credential


class DemoConfig(StrictModel):
    """Marks the embedded demo store: indexed from the packaged corpus on first start."""

    corpus: Literal["packaged"] = "packaged"


class StoreBase(StrictModel):
    """The keys every store has, whatever its engine."""

    backend: str
    """An installed engine's name (:mod:`connectors.registry`); each engine's model
    narrows it to its own."""
    index: str = Field(min_length=1, description="index (ES/OS) or collection (Qdrant)")
    description: str | None = None
    connection: ConnectionConfig
    mapping: MappingConfig = Field(default_factory=MappingConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    request_timeout_ms: int | None = Field(default=None, gt=0)
    scope: ScopeConfig = Field(default_factory=ScopeConfig)
    resilience: ResilienceConfig = Field(default_factory=ResilienceConfig)

    @model_validator(mode="after")
    def _something_to_show(self) -> StoreBase:
        if not (self.mapping.content or self.mapping.content_template) and not self.mapping.uri:
            raise ValueError("mapping: a store needs content, content_template or uri")
        return self

    @model_validator(mode="after")
    def _forwarding_applies(self) -> StoreBase:
        if self.scope.forward_credential and not engine(self.backend).forwards_credential:
            takers = " and ".join(e.name for e in engines() if e.forwards_credential)
            raise ValueError(
                f"scope.forward_credential applies to {takers} only "
                f"({self.backend} has no per-user document security to forward to)"
            )
        return self
