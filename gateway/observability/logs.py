"""Logging to stderr, as JSON lines in production; credentials are scrubbed on the way out."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

import orjson

from connectors.registry import client_loggers

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


# A superset of what the patterns above need (a keyword, or the "@" of userinfo): one scan
# that clears most lines (every audit line without a query) before the three substitutions.
_MAYBE_SECRET = re.compile(r"(?i)authorization|api[-_]?key|password|token|secret|bearer|basic|@")


def may_hold_secret(text: str) -> bool:
    """Whether `text` has a keyword of :data:`_MAYBE_SECRET`. For ASCII text, lower-casing
    makes it exact substring tests, a tenth of the regex's cost on an audit line; other
    text keeps the regex, whose case folding (the Kelvin sign is a k) lower() does not."""
    if not text.isascii():
        return _MAYBE_SECRET.search(text) is not None
    low = text.lower()
    return (
        "@" in low
        or "token" in low
        or "secret" in low
        or "password" in low
        or "authorization" in low
        or "bearer" in low
        or "basic" in low
        or "apikey" in low
        or "api-key" in low
        or "api_key" in low
    )


def scrub(text: str) -> str:
    """`text` with credentials redacted (:func:`redact`), after a cheap check that most
    lines pass untouched."""
    return redact(text) if may_hold_secret(text) else text


def redact(text: str) -> str:
    """`text` with what looks like a credential replaced by ``[redacted]``."""
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
        line = orjson.dumps(out, default=str).decode()
        if line.isascii():
            return line
        # orjson leaves U+2028, NEL and other non-printables raw; a reader may break on them.
        return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in line)


_BARE = re.compile(r"[A-Za-z0-9._:/@+-]{1,300}")
"""A value written unquoted on a text line; anything else is JSON-quoted."""


def escape_text(text: str) -> str:
    """Non-printable characters as escapes: caller text can never start a line of its own."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def text_value(value: Any) -> str:
    """One ``key=value`` value of a text line: bare when plainly safe, else a JSON string.

    JSON quoting (ASCII only) escapes newlines, quotes, spaces' meaning and the
    Unicode line separators, so a method name or a query cannot forge a field
    or a line for another principal.
    """
    if value is None or type(value) in (int, float, bool):
        return str(value)  # digits, signs, dots, "inf", "True", "None": always bare-safe
    text = value if isinstance(value, str) else str(value)
    if _BARE.fullmatch(text):
        return text
    return orjson.dumps(text).decode().encode("ascii", "backslashreplace").decode()


_NOT_EXTRA = _STD_ATTRS | {"asctime"}
"""A record's attributes that are not fields of a text line."""


class TextFormatter(logging.Formatter):
    """``ts LEVEL logger message key=value ...`` on one line per record.

    Every value (and the message) is escaped; a traceback follows on lines that
    start with ``| ``, which no record line does.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self._second = -1
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        # logging's own format, with strftime run once per second rather than once per line.
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(second))
            self._second = second
        return f"{self._stamp},{int(record.msecs):03d}"

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape_text(record.getMessage())
        parts = [f"{self.formatTime(record)} {record.levelname} {record.name} {record.message}"]
        for k, v in vars(record).items():  # the extras, in the order they were set
            if k not in _NOT_EXTRA and not k.startswith("_"):
                parts.append(f"{k}={text_value(v)}")
        line = " ".join(parts)
        if record.exc_info:
            trace = self.formatException(record.exc_info)
            line += "\n" + "\n".join(f"| {t}" for t in trace.splitlines())
        return scrub(line)


HTTP_LOGGERS = ("httpx", "httpcore", "urllib3")
CLIENT_LOGGERS = (*client_loggers(plugins=False), *HTTP_LOGGERS)
"""Engine and HTTP client libraries (the built-in engines' of :mod:`connectors.registry`;
:func:`configure` adds the plugins'); the gateway reports their failures itself."""


class ClientTracebacks(logging.Filter):
    """One line per failed engine request: the clients' own tracebacks only when debugging.

    opensearch-py logs a WARNING with a 40-line traceback for every attempt against
    a node that is down; the gateway already logs and answers the failure.
    """

    names: frozenset[str] = frozenset(CLIENT_LOGGERS)
    """The loggers whose tracebacks are dropped (top-level names)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name.split(".", 1)[0] in self.names:
            record.exc_info = None
            record.exc_text = None
        return True


QUIET_LOGGERS = ("mcp.server.streamable_http",)
"""Libraries whose INFO lines are per request and say nothing: the MCP SDK logs
``Terminating session: None`` after every stateless POST. Their warnings still show."""


class PlainNames(logging.Filter):
    """uvicorn's general logger is named ``uvicorn.error``; its start-up lines are no errors.

    Records of that logger read ``uvicorn`` (their level says whether one is an error).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.error":
            record.name = "uvicorn"
        return True


def configure(fmt: str = "text", level: str = "info") -> None:
    """Send every log line to stderr (stdout belongs to the stdio transport)."""
    # The logging HOWTO's "Optimization": no formatter here prints the caller's file and line,
    # thread or process, and finding them is most of a record's cost (one audit line a call).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    clients = (*client_loggers(), *HTTP_LOGGERS)
    if level.lower() != "debug":
        tracebacks = ClientTracebacks()
        tracebacks.names = frozenset(clients)
        handler.addFilter(tracebacks)
    handler.addFilter(PlainNames())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Client libraries log request URLs (hosts) at INFO; keep them quiet unless debugging.
    for noisy in clients:
        logging.getLogger(noisy).setLevel(logging.WARNING if level != "debug" else logging.DEBUG)
    # The engine clients warn once per failed attempt; the guard logs each change itself
    # (gateway.resilience.reachability).
    for name in (*client_loggers(), "httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.ERROR if level != "debug" else logging.DEBUG)
    for quiet in QUIET_LOGGERS:
        logging.getLogger(quiet).setLevel(
            logging.WARNING if level.lower() != "debug" else logging.DEBUG
        )


ENGINE_CLIENT_LOGGERS = (*client_loggers(plugins=False), "httpx", "httpcore")
"""Client libraries that log a WARNING per failed attempt."""


def quiet_engine_clients() -> None:
    """Errors only from the engine clients: a command that reports failures once, itself."""
    for name in (
        *client_loggers(),
        "httpx",
        "httpcore",
        "a2m.engine",
    ):  # the guard's line too: said once
        logging.getLogger(name).setLevel(logging.ERROR)
