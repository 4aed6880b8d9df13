"""The engine calls around a point in time, for the ordered reads that page with ``from``.

:class:`connectors.lucene.order.OrderedReader` holds no client: the connector
hands it these, bound to its (possibly per-caller) client.
"""

from __future__ import annotations

import logging

from connectors.errors import EngineAnswerUnusable
from connectors.lucene.client import LuceneClient
from connectors.lucene.dialect import Dialect
from connectors.lucene.order import PIT_KEEP_ALIVE

logger = logging.getLogger(__name__)


async def open_pit(engine: LuceneClient, dialect: Dialect, path: str) -> str:
    """A new point in time on the index ``path`` names; its id.

    Raises:
        EngineAnswerUnusable: the answer names no point in time.
    """
    params = {"keep_alive": PIT_KEEP_ALIVE}
    answer = await engine.read_call("POST", path, params=params)
    pit_id = answer.get(dialect.pit.id_key)
    if not isinstance(pit_id, str) or not pit_id:
        raise EngineAnswerUnusable("the engine's answer to opening a point in time names none")
    return pit_id


async def release_pit(engine: LuceneClient, dialect: Dialect, pit_id: str) -> None:
    """Close a point in time; an engine failure is only logged."""
    # Best effort: an unreleased PIT expires after PIT_KEEP_ALIVE anyway.
    pit = dialect.pit
    seconds = min(engine.timeout_s, 5.0)
    try:
        await engine.call("DELETE", pit.close_path, seconds, body=pit.close_body(pit_id))
    except Exception as exc:
        if dialect.classify(exc) is None:
            raise
        logger.debug("closing a point in time failed", exc_info=True)
