"""Answer heads the HTTP parser refuses or misreads but RFC 9110/9112 let a client read.

llhttp (the parser :mod:`connectors.http1` reads answers with) is strict where the
RFCs leave a recipient a choice, and reads one form wrong. :func:`repair` rewrites the
heads of one exchange (its interim answers and the final answer's head) so the parser
takes them:

- the same ``Content-Length`` twice, in two fields or as a list (``42, 42``): one
  field (RFC 9110 §8.6 lets a recipient do so); differing values are refused;
- a ``Content-Length`` or ``Transfer-Encoding`` on a 1xx answer: dropped, as a 1xx
  ends with its head whatever its fields say (RFC 9112 §6.3), where llhttp would
  read a body;
- a higher minor version (``HTTP/1.2``): read as HTTP/1.1 (RFC 9112 §2.3).

It runs only after the parser refused a head, never on the per-call path; its
result is parsed again from the start by a fresh parser.

Errors: :class:`connectors.http_answer.BadResponse` for a head no repair can make
usable (two different lengths); :func:`parser_reason` words the parser's own refusals.
"""

from __future__ import annotations

import re

from connectors.http_answer import BadResponse

_STATUS = re.compile(rb"HTTP/1\.(\d+) (\d{3})")
_FRAMING = (b"content-length", b"transfer-encoding")
_REASON = re.compile(r"[A-Za-z0-9 ,.'/_-]{1,80}")


def repair(data: bytes) -> bytes | None:
    """``data`` (the bytes of an exchange up to and maybe past the final answer's head)
    with its heads rewritten as the module says; None when nothing here applies.

    Raises:
        BadResponse: the final answer's head gives two different lengths.
    """
    out: list[bytes] = []
    pos = 0
    changed = False
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break
        line = data[pos : end + 1]
        pos = end + 1
        found = _STATUS.match(line)
        if found is None:
            return None  # not a status line: nothing this module knows how to mend
        if found.group(1) not in (b"0", b"1"):
            line = b"HTTP/1.1" + line[found.end(1) :]
            changed = True
        out.append(line)
        interim = found.group(2).startswith(b"1")
        pos, fields_changed = _fields(data, pos, out, interim=interim)
        changed |= fields_changed
        if not interim:
            break
    out.append(data[pos:])
    return b"".join(out) if changed else None


def _fields(data: bytes, pos: int, out: list[bytes], *, interim: bool) -> tuple[int, bool]:
    """Copy one head's field lines from ``pos`` to ``out``, mended; the position after
    them (after the empty line, or the end of ``data``) and whether any changed."""
    changed = False
    length: bytes | None = None
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break  # a line still to come: kept as it is
        line = data[pos : end + 1]
        pos = end + 1
        if line in (b"\r\n", b"\n"):
            out.append(line)
            return pos, changed
        name, colon, value = line.partition(b":")
        key = name.strip().lower()
        if colon and interim and key in _FRAMING:
            changed = True  # a 1xx has no body, whatever it says
            continue
        if colon and key == b"content-length":
            values = {v.strip() for v in value.split(b",")}
            if len(values) != 1 or (length is not None and values != {length}):
                raise BadResponse(
                    "the engine's answer gives two different lengths (Content-Length), so "
                    "where it ends is unknown"
                )
            if length is not None or b"," in value:
                changed = True
                if length is not None:
                    continue  # the same length again: one field is enough
                line = b"Content-Length: " + values.pop() + b"\r\n"
            length = value.split(b",")[0].strip()
        out.append(line)
    return pos, changed


def parser_reason(exc: Exception) -> str:
    """The one sentence for an answer the parser refused: the parser's own fixed words
    in brackets when they are plain (they never quote the answer)."""
    words = str(exc)
    detail = f" ({words})" if _REASON.fullmatch(words) and "callback" not in words else ""
    return f"the engine's answer is not valid HTTP/1.1{detail}"
