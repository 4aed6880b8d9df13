"""The whole config document: the server, its stores, and federations of them."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from gateway.config.base import StrictModel
from gateway.config.engines import StoreConfig
from gateway.config.federation import FederationConfig, StoreName
from gateway.config.server import ServerConfig


class GatewayConfig(StrictModel):
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
