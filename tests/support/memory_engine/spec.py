"""What the memory connector is told about its documents."""

from __future__ import annotations

from dataclasses import dataclass

from connectors.spec import ConnectionSpec, ConnectorSpec


@dataclass(frozen=True, slots=True)
class MemoryConnectionSpec(ConnectionSpec):
    documents: str = ""
    """A JSON file: a list of documents, read when the store opens."""


MemorySpec = ConnectorSpec[MemoryConnectionSpec]
