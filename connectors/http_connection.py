"""One keep-alive connection to an engine node: sends a request, reads its answer.

The answer is parsed by httptools (llhttp, the C parser uvicorn serves with) and read
the way RFC 9112 says a client must: interim 1xx answers are skipped (never left for
the next request, a body they claim ignored), a body without a length ends with the
close, a folded header line is unfolded, a bare LF ends a line, whitespace after a
field value is dropped, heads the parser refuses but a client may read are repaired
(:mod:`connectors.http_repair`), the content codings are undone
(:mod:`connectors.http_answer`), and each answer is bounded in its header, body and
decoded bytes. A connection is reused only when the answer says so, its framing left
no doubt, and the request was all written before the answer ended.

Errors (set on the exchange's future): :class:`TimeoutError` at the deadline;
:class:`Lost` when the connection closed before any byte of the answer (a resend is
safe); :class:`ConnectionResetError` when it closed mid-answer; :class:`BadResponse`
for an answer that is not usable HTTP (:class:`AnswerTooLarge` past the limits).
"""

from __future__ import annotations

import asyncio

import httptools

from connectors.http_answer import AnswerLimits, AnswerTooLarge, BadResponse, Response, decode
from connectors.http_repair import parser_reason, repair

_NO_BODY = frozenset({204, 304})


class Lost(ConnectionError):
    """The connection closed before any byte of the answer (a resend is safe)."""


class _Misframed(Exception):
    """The parser reads a body after a 1xx head, which never has one (RFC 9112 §6.3)."""


def _parser(protocol: object) -> httptools.HttpResponseParser:
    parser = httptools.HttpResponseParser(protocol)
    # Folded header lines (obs-fold) are joined instead of refused (RFC 9112 §5.2); a line
    # ended by a bare LF is read as one (§2.2 lets a recipient do so); whitespace before
    # a chunk extension is the BWS the grammar allows (§7.1.1); Transfer-Encoding with a
    # Content-Length is read by the transfer coding (§6.3), and the connection is not
    # reused after it (see Connection._done).
    parser.set_dangerous_leniencies(
        lenient_headers=True,
        lenient_optional_cr_before_lf=True,
        lenient_spaces_after_chunk_size=True,
        lenient_chunked_length=True,
    )
    return parser


class Connection(asyncio.Protocol):
    """One keep-alive connection: sends a request, resolves the answer's future."""

    def __init__(self, limits: AnswerLimits) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0
        self._limits = limits
        self._parser = _parser(self)
        self._waiter: asyncio.Future[Response] | None = None
        self._answered = False
        self._head_only = False
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._head_bytes = 0
        self._body_bytes = 0
        self._interim = False
        self._head_done = False
        self._finished = False
        self._raw: list[bytes] = []
        """The exchange's bytes until the final answer's head is read (for a repair)."""
        self._raw_bytes = 0
        self._repaired_at = -1

    # -- the exchange ------------------------------------------------------------------

    async def exchange(self, data: bytes, deadline: float, *, head_only: bool) -> Response:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Response] = loop.create_future()
        self._waiter = waiter
        self.reusable = False
        self._answered = False
        self._head_only = head_only
        self._finished = False
        self._raw = []
        self._raw_bytes = 0
        self._repaired_at = -1
        self._next_message()
        assert self.transport is not None
        self.transport.write(data)
        timer = loop.call_at(deadline, self._time_out)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def alive(self) -> bool:
        """Not closed, nor closing: a peer's close can be read before it is reported lost."""
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self.transport is not None:
            if self.transport.get_write_buffer_size():
                self.transport.abort()  # what is left of a request nobody will read
            else:
                self.transport.close()

    def _next_message(self) -> None:
        self._headers = []
        self._body = []
        self._head_bytes = 0
        self._body_bytes = 0
        self._interim = False
        self._head_done = False

    def _time_out(self) -> None:
        self._fail(TimeoutError("the engine did not answer in time"))
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        """End the exchange with ``exc``; the connection is out of step and is closed."""
        self._finished = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    def _done(self, keep: bool) -> None:
        self._finished = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in self._headers:
            # The parser leaves the whitespace after a value (RFC 9110 §5.5: not part of it).
            name = raw_name.decode("latin-1").lower()
            value = raw_value.rstrip(b" \t").decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        codings = headers.get("content-encoding")
        transfer = headers.get("transfer-encoding")
        if transfer is not None:
            if transfer.lower() != "chunked":
                # Transfer codings other than chunked (the parser's) were applied last:
                # undone first.
                codings = f"{codings or ''},{transfer.lower().replace('chunked', '')}"
            # With a Content-Length too, the sender's framing is in doubt (RFC 9112 §6.3).
            keep = keep and "content-length" not in headers
        if codings and body:
            try:
                body = decode(codings, body, self._limits.decoded_bytes)
            except BadResponse as exc:
                self._fail(exc)
                return
        assert self.transport is not None
        # An answer before the request was all written: the server did not read the rest.
        self.reusable = keep and not self.transport.get_write_buffer_size()
        waiter.set_result(Response(self._parser.get_status_code(), headers, body))

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._finished:
            return
        if self._head_done and exc is None and self._ends_with_close():
            self._done(keep=False)  # a body without a length ends with the close
        elif not self._answered:
            self._fail(Lost("the engine closed the connection"))
        else:
            self._fail(ConnectionResetError("the engine closed the connection mid-answer"))

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._finished:
            self.close()  # bytes nobody asked for: the stream is out of step
            return
        self._answered = True
        if not self._head_done:
            self._raw.append(data)
            self._raw_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._refused(exc)
        if not self._head_done and self._raw_bytes > self._limits.header_bytes:
            # Every byte so far is a head's: bounded before the parser has a whole field.
            self._head_bytes = self._raw_bytes
            self._count_head(0)

    def _refused(self, exc: Exception) -> None:
        """The parser refused the answer: parse the exchange again from its start on a
        fresh parser, its heads repaired (:mod:`connectors.http_repair`), or fail it."""
        if isinstance(exc, httptools.HttpParserUpgrade):
            self._fail(BadResponse("the engine switched protocols, which no call asks for"))
            return
        fixed = None
        # Not once the final head is read, nor twice for the same bytes.
        if not (self._head_done or self._finished or self._repaired_at == len(self._raw)):
            try:
                fixed = repair(b"".join(self._raw))
            except BadResponse as bad:
                self._fail(bad)
                return
        if fixed is None:
            self._fail(BadResponse(parser_reason(exc)))
            return
        self._repaired_at = len(self._raw)
        self._parser = _parser(self)
        self._next_message()
        try:
            self._parser.feed_data(fixed)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as again:
            self._refused(again)

    # -- httptools callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._finished:  # a second answer to one request: the stream is out of step
            self._fail(BadResponse("the engine sent more than one answer to a request"))

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._finished:
            return
        self._count_head(len(name) + len(value) + 4)
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._finished:
            return
        status = self._parser.get_status_code()
        if status < 200:
            self._interim = True  # 100 Continue, 103 Early Hints: the answer is still to come
            return
        if self._head_only:
            self._done(keep=False)  # the parser would wait for a HEAD answer's body
            return
        self._head_done = True

    def _ends_with_close(self) -> bool:
        """RFC 9112 §6.3: with no length and no chunked coding last, the body ends with
        the close (read only when the connection closes mid-answer)."""
        if self._parser.get_status_code() in _NO_BODY:
            return False
        length = transfer = b""
        for name, value in self._headers:
            if name.lower() == b"content-length":
                length = value
            elif name.lower() == b"transfer-encoding":
                transfer = value.lower()
        chunked = transfer.rstrip(b" \t").endswith(b"chunked")
        return not chunked and bool(transfer or not length)

    def on_body(self, body: bytes) -> None:
        if self._finished:
            return
        if self._interim:
            raise _Misframed  # the parser's error; the exchange is read again, repaired
        self._body_bytes += len(body)
        if self._body_bytes > self._limits.body_bytes:
            self._fail(AnswerTooLarge("the engine's answer is longer than the store's limit"))
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._finished:
            return
        if self._interim:
            self._next_message()
            return
        self._done(keep=self._parser.should_keep_alive())

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self._limits.header_bytes and not self._finished:
            self._fail(AnswerTooLarge("the engine's answer headers are past the store's limit"))
