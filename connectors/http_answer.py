"""What an engine's HTTP answer may be: its size limits, its content codings, its form.

:mod:`connectors.http1` reads the bytes; this module decides what they hold. It undoes
the content codings a client must accept (RFC 9110 §8.4: names case-insensitive,
``x-gzip`` as ``gzip``, a gzip body of several members, ``deflate`` raw or
zlib-wrapped) within a bound on the decoded size; hands a JSON body on as
``application/json`` whatever its label (:func:`usable`); and says in one sentence what
came back when an answer is not the JSON an engine call asked for (a login page, an
empty or still-compressed body, a redirect, a proxy's refusal page, an error page, a
status no engine sends). Each connector uses these sentences, so an operator reads the
same words for every engine.

Errors: :class:`BadResponse` (a :class:`ConnectionError`): the answer is not usable;
its text is one sentence naming what came back (never a host), its ``retryable`` says
whether asking again can help; :class:`AnswerTooLarge` among them for an answer past
the store's limits (not retryable).
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple


class Response(NamedTuple):
    """An engine's final answer, its content codings undone."""

    status: int
    headers: dict[str, str]
    """Lower-case names; a repeated header's values joined by ``, ``."""
    body: bytes


class AnswerLimits(NamedTuple):
    """Bounds on one answer; the defaults fit any search, mapping or health answer."""

    header_bytes: int = 64 * 1024
    """The status line and header fields together."""
    body_bytes: int = 64 * 1024 * 1024
    """The body as sent (compressed when the engine compressed it)."""
    decoded_bytes: int = 256 * 1024 * 1024
    """The body once its content codings are undone."""


class BadResponse(ConnectionError):
    """The engine's answer is not one the call can use; the text says what came back.

    ``retry_after_ms``: the wait the answer asked for (a proxy's busy page with its
    ``Retry-After``), None when it asked for none.
    """

    retryable = True
    """Asking again can help (a proxy or node in a bad moment); False when it cannot."""

    def __init__(self, message: str, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class AnswerTooLarge(BadResponse):
    """The answer is past one of the store's :class:`AnswerLimits`."""

    retryable = False


_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_PROXY_REFUSALS = frozenset({400, 401, 403})
"""Statuses an engine answers with its own JSON error; an HTML page with one is a proxy's."""
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
_PROXY_HINT = "is a login page or proxy in front of the engine?"
_PAGES = frozenset({"text/html", "application/xhtml+xml"})

NOT_VALID_JSON = "the engine answered with a body that is not valid JSON"
"""An answer declared JSON that does not parse."""
BROKEN_CODING = "the engine's compressed answer is broken"
"""An answer whose declared content coding cannot be undone."""


def media_type(headers: Mapping[str, str]) -> str:
    """The answer's media type, lower-case and without parameters; ``""`` when absent or
    not a media type (only a well-formed name is ever quoted in a message)."""
    value = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return value if _MEDIA_TYPE.fullmatch(value) and len(value) <= 80 else ""


def decode(codings: str, body: bytes, limit: int) -> bytes:
    """``body`` with the content codings ``codings`` (the header's value) undone.

    Raises:
        AnswerTooLarge: the decoded body would be over ``limit`` bytes.
        BadResponse: a coding is unknown, or the compressed data is broken.
    """
    names = [name.strip().lower() for name in codings.split(",")]
    for name in reversed(names):  # the last coding applied is undone first
        if name in ("", "identity") or not body:
            continue
        if name in ("gzip", "x-gzip"):
            body = _gunzip(body, limit)
        elif name == "deflate":
            body = _inflate(body, limit)
        else:
            shown = name if re.fullmatch(r"[a-z0-9._-]{1,40}", name) else "an unknown one"
            raise BadResponse(f"the engine answered in content coding {shown}, not gzip or deflate")
    return body


def _gunzip(data: bytes, limit: int) -> bytes:
    """Every member of a gzip body, in order (RFC 1952 §2.2: members are concatenated)."""
    out: list[bytes] = []
    size = 0
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        size += _inflate_into(inflater, data, limit - size, out)
        if not inflater.eof:
            raise BadResponse("the engine's gzip answer is cut short")
        data = inflater.unused_data
        if not data.strip(b"\0"):  # padding after the last member
            break
        if not data.startswith(_GZIP_MAGIC):
            raise BadResponse("the engine's gzip answer has bytes after its last member")
    return b"".join(out)


def _inflate(data: bytes, limit: int) -> bytes:
    """A ``deflate`` body: zlib-wrapped as RFC 9110 says, or raw as some servers send it."""
    wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
    inflater = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
    out: list[bytes] = []
    _inflate_into(inflater, data, limit, out)
    if not inflater.eof:
        raise BadResponse("the engine's deflate answer is cut short")
    return b"".join(out)


def _inflate_into(inflater: Any, data: bytes, room: int, out: list[bytes]) -> int:
    """Inflate ``data`` into ``out``, at most ``room`` bytes; the number of bytes added."""
    added = 0
    try:
        while data:
            chunk = inflater.decompress(data, room - added + 1)
            added += len(chunk)
            if added > room:
                raise AnswerTooLarge("the engine's answer decompresses past the store's limit")
            out.append(chunk)
            data = inflater.unconsumed_tail
            if inflater.eof:
                break
    except zlib.error:
        raise BadResponse(BROKEN_CODING) from None
    return added


class AnswerText(str):
    """An answer's body as text (a client library's connection hands its transport text),
    keeping the bytes it was decoded from in ``body``: a JSON parser given those never
    encodes the text back to UTF-8, which for a non-ASCII answer costs more than the
    parse itself."""

    body: bytes


def answer_text(body: bytes) -> AnswerText:
    """``body`` decoded as UTF-8, keeping ``body``.

    Raises:
        UnicodeDecodeError: ``body`` is not UTF-8.
    """
    text = AnswerText(body, "utf-8")
    text.body = body
    return text


def usable(method: str, answer: Response) -> Response:
    """``answer`` as the engine client can read it, or the one sentence saying why not.

    A success must be a JSON body (not empty, not still compressed, not a page); a
    redirect is never an engine's (a sign-on proxy sends those) and is not followed;
    an HTML page with 400, 401 or 403 is a proxy's, never an engine's refusal. A JSON
    body the clients could not read as it is labelled (no content type, ``text/plain``
    as some proxies send, a type in capitals, Elasticsearch's ``vnd`` type for
    OpenSearch's client, a UTF-8 byte order mark) is handed on as ``application/json``,
    without the mark. Other error statuses are left to the engine's error mapping.

    Raises:
        BadResponse: the answer is not one an engine gives a call.
    """
    status, headers, body = answer
    declared = headers.get("content-type", "").startswith("application/json")
    if declared and body[:1] == b"{" and 200 <= status < 300:
        return answer  # every engine answer: a JSON object, so declared
    if 300 <= status < 400:
        raise BadResponse(_redirected(status))
    kind = media_type(headers)
    if status in _PROXY_REFUSALS and kind == "text/html":
        raise BadResponse(
            f"the engine's address answered {status} with text/html, not an engine's "
            f"error: {_PROXY_HINT}"
        )
    json_body = _json_of(body)
    if json_body is not None and (json_body is not body or not declared):
        answer = Response(status, {**headers, "content-type": "application/json"}, json_body)
    if not 200 <= status < 300 or method == "HEAD" or json_body is not None:
        return answer
    if not body:
        raise BadResponse(f"the engine answered {status} with an empty body, not JSON")
    if body.startswith(_GZIP_MAGIC):
        raise BadResponse(
            f"the engine answered {status} with a body still gzip-compressed that its "
            "content-encoding does not declare"
        )
    if "json" not in kind:
        shown = kind or "no content type"
        raise BadResponse(f"the engine answered {status} with {shown}, not JSON: {_PROXY_HINT}")
    return answer  # declared JSON: the client's parser says whether it is


def _redirected(status: int) -> str:
    if status == 304:
        return (
            "the engine's address answered 304 Not Modified, which no engine sends to a "
            "request without conditions: is a cache or proxy in front of the engine?"
        )
    return (
        f"the engine's address answered {status}, a redirect to another address, which "
        f"the gateway does not follow: {_PROXY_HINT}"
    )


def _json_of(body: bytes) -> bytes | None:
    """``body`` without a UTF-8 byte order mark when it then holds a JSON object or array
    (leading whitespace allowed); None when it does not look like JSON."""
    if body.startswith(_BOM):
        body = body[len(_BOM) :]
    return body if body.lstrip(b" \t\r\n")[:1] in (b"{", b"[") else None


def error_page(status: int, headers: Mapping[str, str]) -> str | None:
    """What came back, in one sentence, when an error status carries a web page: no engine
    answers a call with one (a proxy's or load balancer's page); None otherwise."""
    kind = media_type(headers)
    if kind not in _PAGES:
        return None
    return (
        f"the engine's address answered {status} with {kind}, not the engine's answer: "
        "is a proxy or load balancer in front of the engine?"
    )


def foreign_status(status: int) -> str:
    """A status the engine never sends to the call, in one sentence."""
    return (
        f"the engine's address answered {status}, which no engine sends to this call: "
        "is a proxy in front of the engine?"
    )


def retry_after_ms(headers: Mapping[str, str] | None) -> int | None:
    """The ``Retry-After`` header in milliseconds, when the engine (or a proxy) sent one:
    seconds, or an HTTP-date counted from now (RFC 9110 §10.2.3); None when absent or
    neither."""
    if not headers:
        return None
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0, int(float(value) * 1000))
            except ValueError:
                return _ms_until(value)
    return None


def _ms_until(http_date: str) -> int | None:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # asctime's form names no zone: HTTP-dates are all GMT
        when = when.replace(tzinfo=UTC)
    return max(0, int((when.timestamp() - time.time()) * 1000))
