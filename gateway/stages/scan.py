"""A long text as passage selection scans it: lowered, one character per byte.

Lowering a text that holds any non-ASCII character, and searching it, costs several
times what it does on a text of one byte per character. So a non-ASCII text is scanned
as its UTF-8 bytes, ASCII letters lowered, read as Latin-1 (one character per byte):
its sentence marks, spaces and ASCII words sit where they are in the bytes, and a
position found there maps back to the text's own characters. Non-ASCII capitals are not
lowered (a query term with one matches its lowercase spelling only).
"""

from __future__ import annotations

SCAN_CHARS = 1_000_000
"""Characters of a content that passage selection and the rank read, at most (its head),
as the engines' highlighter analyses at most its first 999,999 by default: a longer
content's passages come from its head, and a content made of query terms costs a
bounded time (each occurrence is handled in Python)."""


class Scan:
    """``text`` lowered for searching (``view``), with positions mapped back by ``char``."""

    __slots__ = ("_data", "_raw", "view")

    def __init__(self, text: str) -> None:
        self._data: bytes | None
        if text.isascii():
            self._raw: bytes | None = None
            self.view = text.lower()
            self._data = None
        else:
            self._raw = text.encode("utf-8")
            self._data = self._raw.lower()
            self.view = self._data.decode("latin-1")

    def data(self) -> bytes:
        """``view`` as bytes, one per character."""
        if self._data is None:
            self._data = self.view.encode("latin-1")
        return self._data

    def terms(self, wanted: list[str]) -> list[str]:
        """The query's (lowered) terms as they are spelt in ``view``."""
        if self._raw is None:
            return wanted
        return [t.encode("utf-8").decode("latin-1") for t in wanted]

    def char(self, pos: int) -> int:
        """The text's character index at ``view`` position ``pos`` (inside a multi-byte
        character: that character's start)."""
        raw = self._raw
        if raw is None:
            return pos
        while 0 < pos < len(raw) and raw[pos] & 0xC0 == 0x80:
            pos -= 1
        return len(raw[:pos].decode("utf-8"))

    def length(self, start: int, end: int) -> int:
        """The text's characters in ``view[start:end]``.

        Raises:
            UnicodeDecodeError: ``start`` or ``end`` inside a character (the view's ASCII
                characters, such as a blank line's, are each a character's start).
        """
        if self._raw is None:
            return end - start
        return len(self._raw[start:end].decode("utf-8"))

    def chars(self, positions: list[int]) -> list[int]:
        """``char`` of each of ``positions`` (non-decreasing), decoding the text once.

        Raises:
            ValueError: a position before the one ahead of it.
        """
        raw = self._raw
        if raw is None:
            return list(positions)
        out: list[int] = []
        done = count = 0
        for pos in positions:
            while 0 < pos < len(raw) and raw[pos] & 0xC0 == 0x80:
                pos -= 1
            if pos < done:
                raise ValueError("positions must not decrease")
            count += len(raw[done:pos].decode("utf-8"))
            done = pos
            out.append(count)
        return out
