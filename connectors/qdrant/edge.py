"""A collection in Qdrant's own engine in this process (qdrant-edge), behind the engine interface.

Every call runs on ONE worker thread off the event loop (qdrant-edge holds the GIL
for a whole call; pages stay small so the loop gets it back between them), and a
deadline cancels the wait. A shard opens once per process: a second open of the
same directory is refused by qdrant-edge's write-ahead-log lock, reported as
:class:`connectors.errors.LocalStorageLocked`. A ``:memory:`` store's shard lives
in a private temporary directory (``connectors.qdrant.shard``) that close removes.
qdrant-edge raises plain exceptions with messages; :meth:`EdgeEngine.errors`
translates them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from importlib.metadata import version
from typing import Any, Final, TypeVar

import qdrant_edge as qe

from connectors.compute import compute_executor
from connectors.errors import (
    ConnectorError,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
)
from connectors.qdrant.edge_models import query_request, scroll_request
from connectors.qdrant.engine import Ranked, Scroll, Shape
from connectors.qdrant.shard import CONFIG_FILE, is_shard, locked, refuse_local_mode, remove_tree

log = logging.getLogger("connectors.qdrant.connector")
T = TypeVar("T")

_LOCKED: Final = ("Can't init WAL", "WouldBlock", "already locked")
"""How qdrant-edge says another process holds the shard."""
_MISSING_VECTOR: Final = "Not existing vector name"
_NO_ORDER_INDEX: Final = "No range index for `order_by`"


class EdgeEngine:
    """One shard, opened by :meth:`get_collection` (the connector's open)."""

    def __init__(self, path: str, *, where: str, temporary: bool = False) -> None:
        """path: the shard's directory; where: the store's ``connection.path`` (or the
        temporary directory of a ``:memory:`` store, removed at close when
        ``temporary``), checked for local mode's files."""
        self.path = path
        self._where = where
        self._temporary = temporary
        self._shard: qe.EdgeShard | None = None
        self._worker = compute_executor("qdrant-edge")
        self.closed = False
        self.engine_name = f"qdrant edge (qdrant-edge-py {version('qdrant-edge-py')})"

    def errors(self) -> AbstractContextManager[None]:
        return edge_errors()

    def is_transient(self, exc: BaseException) -> bool:
        return False  # in process: a failure is the same on every try

    def retry_after_s(self, exc: BaseException) -> float | None:
        return None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self.closed:
            raise EngineUnavailable("the qdrant edge shard is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, functools.partial(fn, *args))

    def _open(self) -> qe.EdgeShard:
        if self._shard is None:
            refuse_local_mode(self._where)
            if not is_shard(self.path):
                raise EngineConfigError("the qdrant collection named by index does not exist")
            try:
                self._shard = qe.EdgeShard.load(self.path)
            except Exception as exc:
                if any(mark in str(exc) for mark in _LOCKED):
                    log.debug("qdrant edge shard is locked: %s", exc)
                    raise locked(self._where) from exc
                raise
        return self._shard

    def _shape(self) -> Shape:
        shard = self._open()
        with open(os.path.join(self.path, CONFIG_FILE), encoding="utf-8") as fh:
            config = json.load(fh)
        dense = {
            name: (int(p["size"]), str(p["distance"]))
            for name, p in (config.get("vectors") or {}).items()
        }
        sparse = {
            name: str((p or {}).get("modifier", "")).lower() == "idf"
            for name, p in (config.get("sparse_vectors") or {}).items()
        }
        schema = {
            name: str(index.data_type).rsplit(".", 1)[-1].lower()
            for name, index in shard.info().payload_schema.items()
        }
        return Shape(dense=dense, sparse=sparse, payload_schema=schema)

    async def get_collection(self) -> Shape:
        return await self._run(self._shape)

    def _loaded(self) -> qe.EdgeShard:
        if self._shard is None:
            raise EngineUnavailable("the qdrant edge shard is not open")
        return self._shard

    async def scroll(self, request: Scroll) -> tuple[list[Any], Any]:
        return await self._run(self._loaded().scroll, scroll_request(request))

    async def query_points(self, request: Ranked) -> list[Any]:
        return await self._run(self._loaded().query, query_request(request))

    async def query_batch_points(self, requests: list[Ranked]) -> list[list[Any]]:
        batch = qe.QueryBatchRequest([query_request(r) for r in requests])
        return await self._run(self._loaded().query_batch, batch)

    async def ping(self) -> bool:
        # In-process: open is up. Asking would queue behind a running call on the worker.
        return self._shard is not None and not self.closed

    async def close(self) -> None:
        """Close after the work already queued (the shard's lock is released then)."""
        if self.closed:
            return
        self.closed = True
        shard, self._shard = self._shard, None
        loop = asyncio.get_running_loop()
        try:
            if shard is not None:
                # Shielded: a caller cancelled mid-close must not leave the shard locked.
                await asyncio.shield(loop.run_in_executor(self._worker, shard.close))
        finally:
            self._worker.shutdown(wait=False)
            if self._temporary:
                remove_tree(self._where)


@contextmanager
def edge_errors() -> Iterator[None]:
    """Translate qdrant-edge's exceptions (plain, with messages) into :mod:`connectors.errors`."""
    try:
        yield
    except ConnectorError:
        raise
    except TimeoutError as exc:
        raise EngineTimeout("qdrant did not answer in time") from exc
    except Exception as exc:
        text = str(exc)
        log.debug("qdrant edge refused the request: %s", text)
        if _MISSING_VECTOR in text:
            raise EngineConfigError(
                "a vector named by search.vector_field or search.sparse_vector "
                "is not in the collection"
            ) from exc
        if _NO_ORDER_INDEX in text:
            raise EngineConfigError(
                "mapping.created_at needs a datetime, integer or float payload index "
                "in the qdrant collection to order by it"
            ) from exc
        if "not initialized" in text:
            raise EngineUnavailable("the qdrant edge shard is closed") from exc
        raise EngineRejected("qdrant refused the request") from exc
