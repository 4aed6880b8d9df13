"""OpenTelemetry traces: off unless the environment asks for them (docs/operations.md).

Tracing is on when all of these hold at start-up:

- ``OTEL_TRACES_EXPORTER`` names an exporter (anything but ``none``);
- ``OTEL_SDK_DISABLED`` is not ``true``;
- the ``otel`` extra (opentelemetry-sdk and the OTLP exporter) is installed.

Everything else (endpoint, headers, sampler, resource, batch sizes,
propagators) is read by the SDK from its own ``OTEL_*`` variables. This module
imports no OpenTelemetry: the spans live in :mod:`gateway.observability.tracing`, imported
only once tracing is on, so a gateway without it pays one global read per call.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from connectors.tracing import set_engine_tracer

if TYPE_CHECKING:
    from gateway.observability.tracing import Tracing

log = logging.getLogger(__name__)

_active: Tracing | None = None


def active() -> Tracing | None:
    """The installed tracing, or None when tracing is off (the common, cheap case)."""
    return _active


def requested(environ: Mapping[str, str]) -> bool:
    """Whether the environment turns tracing on (see the module docstring)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = [e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    return any(e and e != "none" for e in exporters)


def install(tracing: Tracing | None) -> None:
    """Make ``tracing`` the process's tracing (None turns it off); engine clients opened
    after this are traced."""
    global _active
    _active = tracing
    set_engine_tracer(tracing)


def configure_from_env() -> bool:
    """Turn tracing on when the process's environment asks for it; True when it is on.

    Called before the stores open (``serve``, ``stdio``, ``mcp``). A missing extra
    or an exporter that cannot be built is logged and the gateway runs untraced:
    traces are never worth refusing to serve.
    """
    if _active is not None:
        return True
    if not requested(os.environ):
        return False
    try:
        from gateway.observability.tracing import tracing_from_env
    except ImportError:
        from gateway.install import extra_command

        log.warning(
            "OTEL_TRACES_EXPORTER is set but the otel extra is not installed (%s): "
            "tracing stays off",
            extra_command("otel"),
        )
        return False
    try:
        tracing = tracing_from_env()
    except ValueError as exc:
        log.warning("tracing stays off: %s", exc)
        return False
    install(tracing)
    log.info("tracing on: %s", ", ".join(tracing.exporters))
    return True


def shutdown() -> None:
    """Flush and stop the installed tracing (spans still queued are exported)."""
    tracing = _active
    install(None)
    if tracing is not None:
        tracing.shutdown()
