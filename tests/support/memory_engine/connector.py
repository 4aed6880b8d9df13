"""The memory engine's connector: documents read from a JSON file when the store opens."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from connectors.base import Connector, EngineInfo
from connectors.errors import EngineConfigError
from connectors.spec import ConnectorSpec
from tests.support.memory_connector import MemoryConnector
from tests.support.memory_engine.spec import MemoryConnectionSpec, MemorySpec


class MemoryEngineConnector(MemoryConnector):
    """:class:`MemoryConnector` over the documents of ``connection.documents``."""

    def __init__(self, spec: MemorySpec) -> None:
        super().__init__()
        self._path = spec.connection.documents

    async def open(self) -> EngineInfo:
        """Read the documents.

        Raises:
            EngineConfigError: the file is missing or is not a list of documents with ids.
        """
        try:
            raw = await asyncio.to_thread(Path(self._path).read_bytes)
            self.docs = [(str(d["id"]), dict(d)) for d in orjson.loads(raw)]
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise EngineConfigError(
                "connection.documents: not a readable list of documents"
            ) from exc
        return await super().open()


def make_memory_connector(spec: ConnectorSpec[Any]) -> Connector:
    """The connector of one memory store.

    Raises:
        TypeError: the spec's connection is not a memory store's.
    """
    return MemoryEngineConnector(spec.of(MemoryConnectionSpec))
