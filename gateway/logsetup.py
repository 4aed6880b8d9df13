"""Logging to stderr, as JSON lines in production; credentials are scrubbed on the way out."""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

# uvicorn adds color_message, an ANSI-coloured copy of msg.
_STD_ATTRS = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {
    "message",
    "color_message",
}

# Belt and braces: values never meant to reach a log line but which a library might echo.
_SECRET_PATTERNS = [
    re.compile(
        r"(?i)(authorization|api[-_]?key|x-api-key|password|token|secret)"
        r"([\"']?\s*[:=]\s*[\"']?)([^\s\"',;}]+)"
    ),
    re.compile(r"(?i)\b(bearer|basic|apikey)\s+[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"(?i)(https?://)[^/\s:@]+:[^/\s@]+@"),
]


def scrub(text: str) -> str:
    text = _SECRET_PATTERNS[0].sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    text = _SECRET_PATTERNS[1].sub(lambda m: f"{m.group(1)} [redacted]", text)
    return _SECRET_PATTERNS[2].sub(lambda m: f"{m.group(1)}[redacted]@", text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": scrub(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STD_ATTRS and not key.startswith("_"):
                out[key] = scrub(value) if isinstance(value, str) else value
        if record.exc_info:
            out["exc"] = scrub(self.formatException(record.exc_info))
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = {k: v for k, v in vars(record).items() if k not in _STD_ATTRS and k != "asctime"}
        if extras:
            base += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        return scrub(base)


def configure(fmt: str = "text", level: str = "info") -> None:
    """Send every log line to stderr (stdout belongs to the stdio transport)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Client libraries log request URLs (hosts) at INFO; keep them quiet unless debugging.
    for noisy in ("elastic_transport", "opensearch", "httpx", "httpcore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING if level != "debug" else logging.DEBUG)
