"""The request heads the gateway's HTTP/1.1 client (:mod:`connectors.http1`) sends."""

from __future__ import annotations

from collections.abc import Mapping


def host_header(host: str, port: int, *, tls: bool) -> str:
    """The Host header's value for ``host:port``: IPv6 in brackets, the scheme's port left out."""
    name = f"[{host}]" if ":" in host else host
    return name if port == (443 if tls else 80) else f"{name}:{port}"


class RequestHead:
    """The request heads sent to one node: its fixed lines encoded once, the rest per call."""

    def __init__(self, host: str, headers: Mapping[str, str]) -> None:
        """``host``: the Host header's value; ``headers``: sent with every request.

        Raises:
            ValueError: a header would break the request's framing.
        """
        self._host = host
        self._headers = {name.lower(): value for name, value in headers.items()}
        self._fixed = self._lines(self._headers)

    def build(
        self,
        method: str,
        target: str,
        length: int | None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """The head of one request; ``headers`` add to (or replace) the fixed ones.

        Raises:
            ValueError: the method, target or a header would break the request's framing.
        """
        if _breaks(method) or _breaks(target) or " " in target or " " in method:
            raise ValueError("an engine request line holds a space or a line break")
        fixed = self._fixed
        if headers:
            merged = {**self._headers, **{name.lower(): value for name, value in headers.items()}}
            fixed = self._lines(merged)
        size = b"" if length is None else b"content-length: %d\r\n" % length
        return b"%s %s HTTP/1.1\r\n%s%s\r\n" % (
            method.encode("ascii"),
            target.encode("ascii"),
            fixed,
            size,
        )

    def _lines(self, headers: Mapping[str, str]) -> bytes:
        lines = [f"host: {self._host}\r\n"]
        for name, value in headers.items():
            if _breaks(name) or _breaks(value):
                raise ValueError("an engine request header holds a line break")
            lines.append(f"{name}: {value}\r\n")
        return "".join(lines).encode("latin-1")


def _breaks(text: str) -> bool:
    return "\r" in text or "\n" in text or "\0" in text
