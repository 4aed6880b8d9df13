"""The installed engines: one entry each, which the rest of the gateway reads.

An :class:`Engine` names an engine's ``backend:`` value, its ``connection:`` and
search-keys models, its connector factory (the engine's client imported only when a
store of it is built), what ``check`` calls the thing a store reads, the client
libraries' loggers, and where the conformance suite finds the engine's backends. The
gateway builds from these entries the ``backend:`` union of its store models
(``gateway.config.stores``), the factory (:func:`make_connector`), ``check``'s lines,
its log levels and the Helm values schema's ``backend`` list (tests/helm checks it
against :func:`names`); the conformance suite its backend list.

Built-in engines are listed here. Another engine registers itself with
:func:`register_engine` when its module is imported: a module named in the
``A2M_GATEWAY_ENGINES`` environment variable (comma-separated), or one an installed
distribution declares in the ``a2m_gateway.engines`` entry-point group
(docs/adding-an-engine.md).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from connectors.config import EngineConnection, EngineSearchKeys
from connectors.lucene.config import ElasticsearchConnection, LuceneSearchKeys, OpenSearchConnection
from connectors.qdrant.config import QdrantConnection, QdrantSearchKeys

if TYPE_CHECKING:
    from connectors.base import Connector
    from connectors.spec import ConnectorSpec

ENV_VAR = "A2M_GATEWAY_ENGINES"
"""Modules to import at start, each registering an engine (comma-separated)."""
ENTRY_POINTS = "a2m_gateway.engines"
"""The entry-point group whose modules register engines."""


@dataclass(frozen=True, slots=True)
class Engine:
    """Everything the gateway needs to know about one engine, and nothing of A2M."""

    name: str
    """The ``backend:`` value of its stores."""
    connection: type[EngineConnection]
    """The ``connection:`` model."""
    connector: Callable[[ConnectorSpec[Any]], Connector]
    """Builds the connector of one store (contacts nothing; imports the client lazily)
    from a spec whose ``connection`` is the one its connection model's ``spec()`` made
    (:meth:`connectors.spec.ConnectorSpec.of` checks it)."""
    search_keys: type[EngineSearchKeys] = EngineSearchKeys
    """Search keys of this engine only, mixed into the store's ``search:`` model (with
    the keys a mode needs, and its :class:`connectors.spec.SearchSpec` fields)."""
    noun: str = "index"
    """What a store reads, in ``check``'s lines: ``index``, ``collection``."""
    loggers: tuple[str, ...] = ()
    """Client libraries' loggers: quiet unless debugging (they log hosts and tracebacks)."""
    conformance: str = ""
    """Where the conformance suite finds this engine's backends, as ``"module:attr"``: a
    mapping of backend ids to how each seeds and serves the suite's corpora, kept with
    the engine's tests (``tests/support/conformance``); empty: none."""
    forwards_credential: bool = True
    """The engine has per-user document security a caller's credential can be sent to."""


def _lucene(spec: ConnectorSpec[Any]) -> Connector:
    from connectors.lucene.connector import LuceneConnector
    from connectors.lucene.spec import LuceneConnectionSpec

    return LuceneConnector(spec.of(LuceneConnectionSpec))


def _qdrant(spec: ConnectorSpec[Any]) -> Connector:
    from connectors.qdrant.connector import QdrantConnector
    from connectors.qdrant.spec import QdrantConnectionSpec

    return QdrantConnector(spec.of(QdrantConnectionSpec))


_ELASTIC_LOGGERS = ("elastic_transport",)
_OPENSEARCH_LOGGERS = ("opensearch", "opensearchpy")

_ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> None:
    """Make ``engine`` a ``backend:`` of the config, the factory and ``check``.

    Registering the same entry again is a no-op (a module imported twice).

    Raises:
        ValueError: another engine already has this name.
    """
    known = _ENGINES.get(engine.name)
    if known is not None and known != engine:
        raise ValueError(f"engine {engine.name!r} is registered already")
    _ENGINES[engine.name] = engine


for _builtin in (
    Engine(
        "elasticsearch",
        ElasticsearchConnection,
        _lucene,
        LuceneSearchKeys,
        loggers=_ELASTIC_LOGGERS,
        conformance="tests.support.conformance.lucene:ELASTICSEARCH",
    ),
    Engine(
        "opensearch",
        OpenSearchConnection,
        _lucene,
        LuceneSearchKeys,
        loggers=_OPENSEARCH_LOGGERS,
        conformance="tests.support.conformance.lucene:OPENSEARCH",
    ),
    Engine(
        "qdrant",
        QdrantConnection,
        _qdrant,
        QdrantSearchKeys,
        noun="collection",
        conformance="tests.support.conformance.qdrant:QDRANT",
        forwards_credential=False,
    ),
):
    register_engine(_builtin)

_loaded = False


def load_plugins() -> None:
    """Import the modules that register more engines (the environment's, the entry points').

    Raises:
        ImportError: a module named in ``A2M_GATEWAY_ENGINES`` cannot be imported.
    """
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in filter(None, (n.strip() for n in os.environ.get(ENV_VAR, "").split(","))):
        importlib.import_module(name)
    for point in entry_points(group=ENTRY_POINTS):
        point.load()


def engines() -> tuple[Engine, ...]:
    """Every installed engine, built-ins first, in the order registered."""
    load_plugins()
    return tuple(_ENGINES.values())


def names() -> tuple[str, ...]:
    """Every installed engine's ``backend:`` value."""
    return tuple(e.name for e in engines())


def engine(name: str) -> Engine:
    """The engine whose ``backend:`` is ``name``.

    Raises:
        KeyError: no such engine is installed.
    """
    load_plugins()
    return _ENGINES[name]


def make_connector(spec: ConnectorSpec[Any]) -> Connector:
    """Build the connector for one store (nothing is contacted until open()).

    Raises:
        ValueError: no installed engine has the spec's backend.
    """
    try:
        entry = engine(spec.backend)
    except KeyError:
        raise ValueError(f"unknown backend {spec.backend!r}") from None
    return entry.connector(spec)


def client_loggers(*, plugins: bool = True) -> tuple[str, ...]:
    """Every installed engine's client loggers (``plugins=False``: those registered so far,
    without importing the plugin modules)."""
    listed = engines() if plugins else tuple(_ENGINES.values())
    return tuple(dict.fromkeys(name for e in listed for name in e.loggers))
