"""A small engine that keeps its documents in memory: the proof that an engine plugs in.

Importing this package registers the ``memory`` backend (:mod:`connectors.registry`);
``A2M_GATEWAY_ENGINES=tests.support.memory_engine`` makes the gateway import it at
start. Nothing outside this package names it: its stores validate, open, answer
``check``, describe, recall, timeline and fetch like any other, and the conformance
suite runs on it (:mod:`tests.support.memory_engine.conformance`;
docs/adding-an-engine.md walks through it).
"""

from __future__ import annotations

from connectors.registry import Engine, register_engine
from tests.support.memory_engine.config import MemoryConnection, MemorySearchKeys
from tests.support.memory_engine.connector import make_memory_connector

MEMORY = Engine(
    "memory",
    MemoryConnection,
    make_memory_connector,
    MemorySearchKeys,
    noun="document set",
    conformance="tests.support.memory_engine.conformance:BACKENDS",
    forwards_credential=False,
)

register_engine(MEMORY)
