"""Pick a connector from the spec's backend (:mod:`connectors.registry`); engine clients
are imported lazily."""

from __future__ import annotations

from connectors.registry import make_connector

__all__ = ["make_connector"]
