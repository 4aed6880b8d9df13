"""Opening a store: the one-time bootstrap, then the engine's open through the guard.

A gateway boots while an engine may still be down, so a store opens on first
use; the lock makes concurrent first calls open it once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from connectors.errors import EngineConfigError
from connectors.retry import deadline_scope
from gateway.embedders import EmbedderUnavailable
from gateway.security.scopes import CredentialForwarding
from gateway.store.query_vectors import check_width

if TYPE_CHECKING:
    from gateway.store.store import Store

Bootstrap = Callable[[], Awaitable[None]]
"""Run once before the engine is opened (the demo store indexes its corpus)."""


class Opener:
    """Opens one store: its bootstrap runs once, its engine is opened through its guard."""

    def __init__(self, bootstrap: Bootstrap | None) -> None:
        self._bootstrap = bootstrap
        self._lock = asyncio.Lock()

    async def ensure(self, store: Store) -> None:
        """Open the store unless it is open, so a gateway can boot while an engine is down.

        Raises:
            connectors.errors.ConnectorError: the engine or index is not usable yet.
        """
        if store.started:
            return
        async with self._lock:
            if not store.started:
                # Indexing the demo (embedding its corpus) may take longer than one
                # request is allowed: not under its deadline.
                await self._run_bootstrap()
                async with deadline_scope(store.timeout_s):
                    await self.open(store)
                if store.embedder is not None:
                    # The model loads now, not on the first query, and not under one call's
                    # deadline: "ready" means ready. A model that cannot load is reported
                    # by each query (EmbedderUnavailable), as before.
                    with contextlib.suppress(EmbedderUnavailable):
                        await store.embedder.warm()

    async def open(self, store: Store) -> None:
        """Run the bootstrap if it has not run, open the engine, fix capabilities.

        Raises:
            connectors.errors.ConnectorError: the engine or index is not usable, or the
                server's own embedder gives vectors of another width than the index's.
        """
        if store.config.scope.forward_credential and not isinstance(
            store.connector, CredentialForwarding
        ):
            # Reading with the gateway's own rights would bypass the engine's document security.
            raise EngineConfigError(
                f"stores.{store.name}.scope.forward_credential: this connector cannot send "
                "the caller's credential to the engine"
            )
        await self._run_bootstrap()  # open() called directly (tests, check)
        info = await store.guard.call(store.connector.open)
        check_width(store.name, store.embedder, info)
        store.declared.learn(info)

    async def _run_bootstrap(self) -> None:
        if self._bootstrap is not None:
            await self._bootstrap()
            self._bootstrap = None
