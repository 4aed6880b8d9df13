"""The conformance suite's backends: each engine's stores of the suite's corpora, by id.

Each engine's registry entry (:class:`connectors.registry.Engine`) names in
``conformance`` a mapping ``{backend id: ConformanceBackend}`` as ``"module:attr"``,
kept in the engine's own test package. :func:`conformance_backends` imports them for
every installed engine (those ``A2M_GATEWAY_ENGINES`` or an entry point registers
included), and ``tests/conformance`` runs its store-facing tests on each id. A backend
seeds its engine with the packaged demo corpus (:meth:`ConformanceBackend.seed`) and,
where the engine keeps dense vectors, with the small vector set of
``tests/conformance/test_embeddings.py`` (:attr:`ConformanceBackend.vectors`); an
engine without dense vectors says so by giving none, and that module skips it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.registry import engines


@dataclass(frozen=True)
class Seeding:
    """What a backend may use to seed its store."""

    root: Path
    """A fresh directory of its own, for files the store reads."""
    fixture: Callable[[str], Any]
    """A pytest fixture's value by name (an engine node's URL: ``elasticsearch_url``)."""


@dataclass(frozen=True)
class VectorSet:
    """Documents with a dense vector each, to be served as a store with ``embeddings``.

    The store maps ``mapping`` (content under ``text_field``); its search is lexical on
    that field, and the vector is what ``memory/recall``'s ``embedding`` is matched to.
    """

    root: Path
    """A fresh directory of its own."""
    distance: str
    """The vector's metric, in Qdrant's names: ``Cosine``, ``Dot``, ``Euclid``."""
    dims: int
    ids: list[str]
    payloads: list[dict[str, Any]]
    vectors: list[list[float]]
    mapping: dict[str, Any]
    text_field: str
    """Analysed text."""
    keyword_fields: tuple[str, ...]
    """Matched exactly (the key among them)."""
    key_field: str
    created_at_field: str
    demo: dict[str, Any] | None
    """The backend's demo store section (where its engine is); None: the embedded demo."""


@dataclass(frozen=True)
class ConformanceBackend:
    """How the suite gets one store of the demo corpus on an engine (and its needs)."""

    seed: Callable[[Seeding], dict[str, Any] | None]
    """The ``stores.demo`` section of a store holding the packaged demo corpus (its
    mapping is the embedded demo's); None: the embedded demo itself (no ``--config``)."""
    marks: tuple[Any, ...] = ()
    """pytest marks of what it needs running (``pytest.mark.elasticsearch``)."""
    records_only: bool = False
    """Runs only the modules that read records (another protocol to the same engine)."""
    vectors: Callable[[VectorSet], dict[str, Any]] | None = None
    """A store section holding the vector set; None: the engine keeps no dense vectors."""


def conformance_backends() -> dict[str, ConformanceBackend]:
    """Every installed engine's conformance backends, by id, in registry order.

    Raises:
        ImportError: an engine's ``conformance`` module cannot be imported.
        ValueError: two engines declare the same backend id.
    """
    found: dict[str, ConformanceBackend] = {}
    for entry in engines():
        if not entry.conformance:
            continue
        module, _, attr = entry.conformance.partition(":")
        declared: Mapping[str, ConformanceBackend] = getattr(importlib.import_module(module), attr)
        for name, backend in declared.items():
            if name in found:
                raise ValueError(f"conformance backend {name!r} is declared twice")
            found[name] = backend
    return found
