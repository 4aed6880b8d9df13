"""The `resilience:` block of a store (docs/configuration.md): self-contained models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BreakerConfig(_Model):
    """When the store stops calling its engine, and how soon it tries again."""

    enabled: bool = True
    failure_threshold: int = Field(
        default=5, ge=1, le=1000, description="consecutive failures or timeouts that open it"
    )
    window_ms: int = Field(
        default=10_000, gt=0, description="the failures must fall within this long"
    )
    open_ms: int = Field(default=1_000, gt=0, description="first wait before the half-open probe")
    max_open_ms: int = Field(
        default=4_000, gt=0, description="cap of the wait, doubled after each failed probe"
    )
    watch_ms: int = Field(
        default=250,
        ge=0,
        le=60_000,
        description="while open, ping the engine this often; its first good answer lets the "
        "next call probe at once (0: only the timed wait ends an opening)",
    )
    # Longer than watch_ms plus a ping and a probe, so a call that arrives just after a
    # ping still sees the next one decide.
    hold_ms: int = Field(
        default=500,
        ge=0,
        le=10_000,
        description="a call meeting the open breaker waits this long (at most half its "
        "deadline) for the breaker's next decision before it is refused (0: refuse at once)",
    )

    @model_validator(mode="after")
    def _ordered(self) -> BreakerConfig:
        if self.max_open_ms < self.open_ms:
            raise ValueError("max_open_ms must be at least open_ms")
        return self


class SheddingConfig(_Model):
    """How many engine calls may run at once, and how long one may wait for a turn."""

    enabled: bool = True
    max_inflight: int | None = Field(
        default=None, gt=0, le=10_000, description="default: connection.pool_maxsize"
    )
    max_wait_ms: int = Field(
        default=100, ge=0, le=60_000, description="longest wait for a free slot"
    )


class ResilienceConfig(_Model):
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    shedding: SheddingConfig = Field(default_factory=SheddingConfig)
