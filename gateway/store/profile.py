"""Store profile: what the engine holds -> capabilities, the one capability gate, describe."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from connectors.base import EngineInfo
from gateway import PROTOCOL
from gateway.a2m.errors import CapabilityNotSupported, ProtocolNotSupported
from gateway.a2m.methods import METHOD_CAPABILITY, Capability
from gateway.a2m.params import DescribeParams, RecallParams, TimelineParams
from gateway.config import StoreConfig
from gateway.embedders import QueryEmbedder
from gateway.front.prompt import METHODS, STYLES
from gateway.security.scopes import LOCAL, Caller, NothingVisible, ScopePolicy


def gate_method(declares: Callable[[Capability], bool], method: str) -> None:
    """The method gate of a store or a federation (whatever `declares` answers for).

    Raises:
        CapabilityNotSupported: the method's capability is not declared.
    """
    cap = METHOD_CAPABILITY[method]
    if not declares(cap):
        raise CapabilityNotSupported(
            f"Server does not implement the '{cap.value}' capability",
            data={"capability": cap.value},
        )


class StoreProfile:
    """A store's declared shape; fixed once the engine has been read (`learn`)."""

    def __init__(
        self,
        name: str,
        config: StoreConfig,
        scope: ScopePolicy,
        embedder: QueryEmbedder | None,
        server_name: str,
    ) -> None:
        self.name = name
        self.config = config
        self.scope = scope
        self.embedder = embedder
        self.server_name = server_name
        self.info: EngineInfo | None = None
        self.capabilities: list[Capability] = [Capability.CORE]

    def learn(self, info: EngineInfo) -> None:
        """Fix the capabilities from what the engine holds."""
        caps = [Capability.CORE]
        m = self.config.mapping
        if m.uri:
            caps.append(Capability.EXTERNAL)
        if m.key:
            caps.append(Capability.KEYS)
        if info.vectors is not None:
            caps.append(Capability.EMBEDDINGS)
        caps.append(Capability.PROMPT)
        self.info = info
        self.capabilities = caps

    def declares(self, cap: Capability) -> bool:
        return cap in self.capabilities

    # -- the capability gate: every method and param capability is checked here ------

    def gate_method(self, method: str) -> None:
        gate_method(self.declares, method)

    def gate_params(self, params: RecallParams | TimelineParams) -> None:
        """Raises: CapabilityNotSupported: a param of an undeclared capability was given."""
        if params.tier is not None:
            raise CapabilityNotSupported(
                "Server does not implement the 'tiers' capability (tier was given)"
            )
        if params.key_prefix is not None and not self.declares(Capability.KEYS):
            raise CapabilityNotSupported(
                "Server does not implement the 'keys' capability (key_prefix was given)"
            )
        if (
            isinstance(params, RecallParams)
            and params.embedding is not None
            and not self.declares(Capability.EMBEDDINGS)
        ):
            raise CapabilityNotSupported(
                "Server does not implement the 'embeddings' capability (embedding was given)"
            )

    # -- describe -------------------------------------------------------------------

    def describe(
        self, params: DescribeParams | None = None, caller: Caller = LOCAL
    ) -> dict[str, Any]:
        """The memory/describe result, built from what the engine really holds.

        `scopes` depends on the caller: it is declared only where it is true for
        this transport and principal (gateway.security.scopes).

        Raises:
            ProtocolNotSupported: the client asked for another protocol version.
            ScopeDenied: an owner the caller may not act for.
        """
        if params is not None and params.protocol is not None and params.protocol != PROTOCOL:
            raise ProtocolNotSupported(
                f"Protocol {params.protocol!r} is not supported; this server speaks {PROTOCOL}",
                data={"supported": [PROTOCOL]},
            )
        if params is not None and params.owner is not None and self.scope.declared(caller):
            # describe reports no counts to scope, but an owner the caller may not act
            # for is refused here as on every other method (-32005).
            with contextlib.suppress(NothingVisible):
                self.scope.conditions(caller, params.owner)
        lim = self.config.limits
        methods = [m for m, cap in METHOD_CAPABILITY.items() if cap in self.capabilities]
        capabilities = [c.value for c in self.capabilities]
        if self.scope.declared(caller):
            at = capabilities.index("prompt") if "prompt" in capabilities else len(capabilities)
            capabilities.insert(at, Capability.SCOPES.value)
        result: dict[str, Any] = {
            "protocol": PROTOCOL,
            "name": self.name,
            "capabilities": capabilities,
            "methods": methods,
            "read_only": True,
            "limits": {
                "max_recall_limit": lim.max_recall_limit,
                "max_query_length": lim.max_query_length,
                "max_where_keys": lim.max_where_keys,
                "max_where_values": lim.max_where_values,
            },
        }
        if self.config.description:
            result["description"] = self.config.description
        if self.info is not None and self.info.vectors is not None:
            v = self.info.vectors
            result["embeddings"] = {
                "dimensions": v.dimensions,
                "metric": v.metric,
                "metrics": list(v.metrics),
                "model": self.embedder.model_name if self.embedder else None,
            }
        if Capability.PROMPT in self.capabilities:
            result["prompt"] = {
                "styles": list(STYLES),
                "methods": list(METHODS),
                "model": None,
                "max_budget": lim.max_prompt_budget,
            }
        result["search"] = {"mode": self.config.search.mode.value, "server": self.server_name}
        return result
