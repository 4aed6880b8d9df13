"""Qdrant local mode, off the event loop.

qdrant-client's local mode is the engine itself, computed in Python: its async
client does that work inside the event loop, so one scan of a large collection
stalls every other request and no deadline can fire until it ends. Here the
synchronous client runs on ONE worker thread (local mode is not thread-safe),
and each call is awaited from the loop: the loop stays free and a deadline
cancels the wait (the scan in the thread finishes on its own; the next call
queues behind it). Local mode is meant for the demo and small stores.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from connectors.compute import compute_executor
from connectors.errors import LocalStorageLocked

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient, QdrantClient

log = logging.getLogger(__name__)


class LocalClient:
    """The awaitable surface of ``AsyncQdrantClient`` over a sync local-mode client."""

    def __init__(self, client: QdrantClient) -> None:
        self._client = client
        self._worker = compute_executor("qdrant-local")
        self.closed = False

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._worker, functools.partial(method, *args, **kwargs)
            )

        return call

    async def close(self) -> None:
        """Close after the work already queued (its lock on the path is released then)."""
        if self.closed:
            return
        self.closed = True
        loop = asyncio.get_running_loop()
        try:
            # Shielded: a caller cancelled mid-close must not leave the path locked.
            await asyncio.shield(loop.run_in_executor(self._worker, self._client.close))
        finally:
            self._worker.shutdown(wait=False)


def open_local(path: str | None, location: str | None = None) -> AsyncQdrantClient:
    """A local-mode client on ``path`` (on disk) or ``location`` (``:memory:``).

    Typed as the async client: :class:`LocalClient` offers the same awaitable methods.

    Raises:
        LocalStorageLocked: another process holds ``path`` (local mode locks it).
    """
    from qdrant_client import QdrantClient

    if path is None:
        return cast("AsyncQdrantClient", LocalClient(QdrantClient(location=location)))
    try:
        client = QdrantClient(path=path)  # creates the directory when absent
    except RuntimeError as exc:
        # "Storage folder ... is already accessed by another instance of Qdrant client".
        log.debug("qdrant local mode could not open its path: %s", exc)
        raise LocalStorageLocked(path) from exc
    return cast("AsyncQdrantClient", LocalClient(client))
