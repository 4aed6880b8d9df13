"""Store profile: what the engine holds -> the store's Profile value (gateway.front.profile)."""

from __future__ import annotations

from typing import Any

from connectors.base import EngineInfo
from gateway.a2m.methods import Capability
from gateway.config import StoreConfig
from gateway.embedders import QueryEmbedder
from gateway.front.profile import Limits, Profile
from gateway.stages.pipeline import Stages
from gateway.store.connector_spec import engine_passages


class StoreProfile:
    """A store's declared shape; fixed once the engine has been read (`learn`)."""

    def __init__(
        self,
        name: str,
        config: StoreConfig,
        embedder: QueryEmbedder | None,
        server_name: str,
    ) -> None:
        self.name = name
        self.config = config
        self.embedder = embedder
        self.limits = Limits.of(config.limits)
        self._search: dict[str, Any] = {"mode": config.search.mode.value, "server": server_name}
        stages = Stages(
            config.search, engine_passages=engine_passages(config) is not None
        ).describe()
        if stages:
            self._search["stages"] = stages
        self.info: EngineInfo | None = None
        # Until the engine is read: what the config alone declares (describe answers it
        # while the engine is down); `embeddings` needs the index's vectors, so it waits.
        self.value = self._profile(self._capabilities(None), None)

    def learn(self, info: EngineInfo) -> None:
        """Fix the capabilities from what the engine holds."""
        self.info = info
        self.value = self._profile(self._capabilities(info), self.embeddings())

    def _capabilities(self, info: EngineInfo | None) -> list[Capability]:
        caps = [Capability.CORE]
        m = self.config.mapping
        if m.uri:
            caps.append(Capability.EXTERNAL)
        if m.key:
            caps.append(Capability.KEYS)
        if info is not None and info.vectors is not None:
            caps.append(Capability.EMBEDDINGS)
        caps.append(Capability.PROMPT)
        return caps

    def embeddings(self) -> dict[str, Any] | None:
        """describe's `embeddings` block: the index's vectors and the query embedder's model."""
        if self.info is None or self.info.vectors is None:
            return None
        v = self.info.vectors
        return {
            "dimensions": v.dimensions,
            "metric": v.metric,
            "metrics": list(v.metrics),
            "model": self.embedder.model_name if self.embedder else None,
        }

    def _profile(self, caps: list[Capability], embeddings: dict[str, Any] | None) -> Profile:
        return Profile.build(
            self.name,
            caps,
            self.limits,
            self._search,
            description=self.config.description,
            embeddings=embeddings,
        )

    @property
    def capabilities(self) -> list[Capability]:
        return list(self.value.order)
