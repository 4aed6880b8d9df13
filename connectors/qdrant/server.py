"""A Qdrant server collection behind the engine interface, through qdrant-client (REST or gRPC).

Imported only when a store names ``connection.url``: qdrant-client is loaded here and
in the modules this one uses, never on the in-process path.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

from connectors.errors import EngineAnswerUnusable
from connectors.qdrant import errors
from connectors.qdrant.connect import server_client
from connectors.qdrant.engine import Ranked, Scroll, Shape
from connectors.qdrant.server_models import (
    batch_request,
    query_arguments,
    server_filter,
    shape_of,
)
from connectors.retry import remaining

if TYPE_CHECKING:
    import httpx
    from qdrant_client import AsyncQdrantClient

    from connectors.qdrant.spec import QdrantConnectionSpec

log = logging.getLogger("connectors.qdrant.connector")

T = TypeVar("T")


async def _result(pending: Awaitable[T]) -> T:
    """qdrant-client's answer to one call.

    Raises:
        EngineAnswerUnusable: the answer's JSON holds no result (qdrant-client asserts
            one: a JSON answer of another server, 200 and ``{"ok": true}`` say).
    """
    try:
        return await pending
    except AssertionError as exc:
        log.debug("qdrant answer holds no result: %s", exc)
        raise EngineAnswerUnusable(errors.NOT_QDRANTS_JSON) from exc


class ServerEngine:
    """One collection on a Qdrant server; the client is created here, nothing is sent yet
    (its REST requests go through ``transport`` when given)."""

    def __init__(
        self,
        connection: QdrantConnectionSpec,
        collection: str,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client: AsyncQdrantClient = server_client(connection, timeout_s, transport)
        self._collection = collection
        self._timeout_s = timeout_s
        self.engine_name = "qdrant"

    def errors(self) -> AbstractContextManager[None]:
        return errors.engine_errors()

    def is_transient(self, exc: BaseException) -> bool:
        return errors.is_transient(exc)

    def retry_after_s(self, exc: BaseException) -> float | None:
        return errors.asked_retry_after_s(exc)

    def _server_timeout(self) -> int:
        """Whole seconds for the server's own timeout (it takes an int), at least 1."""
        return max(1, math.ceil(remaining(self._timeout_s)))

    async def get_collection(self) -> Shape:
        shape = shape_of(await _result(self._client.get_collection(self._collection)))
        self.engine_name = f"qdrant {(await _result(self._client.info())).version}"
        return shape

    async def scroll(self, request: Scroll) -> tuple[list[Any], Any]:
        from qdrant_client.http import models

        order = None
        if request.order_by is not None:
            key, newest_first = request.order_by
            order = models.OrderBy(
                key=key, direction=models.Direction.DESC if newest_first else models.Direction.ASC
            )
        return await _result(
            self._client.scroll(
                self._collection,
                scroll_filter=server_filter(request.qfilter),
                limit=request.limit,
                order_by=order,
                offset=request.offset,
                with_payload=request.with_payload,
                with_vectors=request.with_vectors,
                timeout=self._server_timeout(),
            )
        )

    async def query_points(self, request: Ranked) -> list[Any]:
        response = await _result(
            self._client.query_points(
                self._collection, **query_arguments(request), timeout=self._server_timeout()
            )
        )
        return list(response.points)

    async def query_batch_points(self, requests: list[Ranked]) -> list[list[Any]]:
        responses = await _result(
            self._client.query_batch_points(
                self._collection,
                requests=[batch_request(r) for r in requests],
                timeout=self._server_timeout(),
            )
        )
        return [list(r.points) for r in responses]

    async def ping(self) -> bool:
        return bool(await _result(self._client.collection_exists(self._collection)))

    async def close(self) -> None:
        await self._client.close()
