"""What the outermost layer (http._A2MApp) checks of every request's head and connection.

Two rules, on either parser:

- A head over ``http.max_header_bytes`` is refused 431 and its connection
  closed. The guarded protocols count a head while it arrives over several
  reads (head_deadline.py); a head that arrives whole in one read reaches the
  app, which measures it here.
- An answer sent before the request's body was read to its end (a refusal: 401,
  403, 404, 405, 421, 431, a spent rate limit, ...) says ``Connection: close``,
  and uvicorn closes the connection once it is sent. Kept open, the unread
  body's bytes would be discarded as they trickle in, each one cancelling
  uvicorn's keep-alive timer, with no head deadline running (a head is in) and
  no body deadline either (nothing reads the body): one byte now and then would
  hold the socket for ever.
"""

from __future__ import annotations

from starlette.types import Message, Receive, Scope

CLOSE = (b"connection", b"close")
_REQUEST_LINE_BYTES = len(b" HTTP/1.1\r\n") + 1  # and the method, the target
_FIELD_BYTES = len(b": \r\n")


def measure_head(scope: Scope) -> tuple[int, bool]:
    """The request head's size in bytes as sent (request line and fields; whitespace
    around values aside), and whether it announces a body (a non-zero Content-Length,
    or a Transfer-Encoding)."""
    size = len(scope["method"]) + len(scope.get("raw_path") or b"") + _REQUEST_LINE_BYTES
    query = scope.get("query_string") or b""
    size += len(query) + 1 if query else 0
    body = False
    for name, value in scope["headers"]:
        size += len(name) + len(value) + _FIELD_BYTES
        if name == b"content-length":
            body = body or value.strip(b" \t0") != b""
        elif name == b"transfer-encoding":
            body = True
    return size, body


class BodyWatch:
    """The request's ``receive``, noting when the last of its body has been read.

    ``must_close`` holds while a body the head announced has not been read to its
    end: an answer sent then closes the connection (module docstring). A refusal of
    the head itself sets it too, body or none, as the parsers' own refusals close.
    """

    __slots__ = ("_receive", "must_close")

    def __init__(self, receive: Receive, announced: bool) -> None:
        self._receive = receive
        self.must_close = announced

    async def receive(self) -> Message:
        message = await self._receive()
        if not message.get("more_body", False):  # the body's last chunk, or a disconnect
            self.must_close = False
        return message
