"""Federations: several stores answering as one (gateway.federation.federation)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from gateway.config.base import StrictModel

STORE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
"""What a store or federation name may be (the config's keys and URL segments)."""

StoreName = Annotated[str, Field(pattern=STORE_NAME.pattern)]


class FederationMember(StrictModel):
    store: StoreName
    weight: float = Field(default=1.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        return {"store": v} if isinstance(v, str) else v


class FederationConfig(StrictModel):
    """Several stores answering as one (gateway.federation.federation): fan-out, weighted RRF."""

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
