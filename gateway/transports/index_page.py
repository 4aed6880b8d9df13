"""The page ``GET /`` answers: what this server is, its URL scheme and where its docs are.

JSON by default (curl, scripts); HTML when the Accept header puts ``text/html``
before any JSON type (a browser). It names nothing the operator did not choose to
publish: the fixed URL scheme, the docs, and store names only when the caller
could read the discovery document anyway (auth off).
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from gateway import PROTOCOL

DOCS = {
    "readme": "README.md",
    "protocol": "docs/protocol.md",
    "configuration": "docs/configuration.md",
    "security": "SECURITY.md",
    "spec": "https://github.com/dibenedetto/a2m-protocol",
}
"""Where to read more: files of the gateway's source distribution, and the A2M draft."""


def doc_file(name: str) -> Path | None:
    """The file of doc `name` where this install carries it (a source checkout, the image).

    None for the draft (an address, not a file), an unknown name, or an install without it.
    """
    where = DOCS.get(name)
    if where is None or "://" in where:
        return None
    path = Path(__file__).resolve().parents[2] / where
    return path if path.is_file() else None


def served_docs() -> dict[str, str]:
    """Where each doc is read on this server: its address, or ``/docs/<name>`` when served."""
    return {
        name: where if "://" in where else f"/docs/{name}"
        for name, where in DOCS.items()
        if "://" in where or doc_file(name) is not None
    }


MCP_ENDPOINTS = {
    "POST /mcp": "MCP Streamable HTTP: every store and federation (docs/mcp.md)",
    "POST /mcp/{store}": "MCP Streamable HTTP: one store or federation",
}
"""The MCP door, listed unless ``server.mcp.enabled`` is false."""


def index_page(stores: list[str] | None, *, mcp: bool = True) -> dict[str, Any]:
    """The body of ``GET /``; ``stores`` None leaves store names out, ``mcp`` False the MCP door."""
    page: dict[str, Any] = {
        "name": "a2m-gateway",
        "description": "Read-only A2M (Agent-to-Memory) JSON-RPC server",
        "protocol": PROTOCOL,
        "endpoints": {
            "POST /a2m": "A2M JSON-RPC on the default store",
            "POST /a2m/{store}": "A2M JSON-RPC on one store",
            "GET /.well-known/a2m-server.json": "the default store's describe, with every store",
            **(MCP_ENDPOINTS if mcp else {}),
            "GET /a2m/{store}/.well-known/a2m-server.json": "one store's describe",
            "GET /healthz": "process alive",
            "GET /readyz": "every store's engine reachable (503 otherwise)",
            "GET /metrics": "Prometheus metrics",
        },
        "docs": DOCS,
        "doc_links": served_docs(),
    }
    if stores is not None:
        page["stores"] = {name: f"/a2m/{name}" for name in stores}
    return page


def prefers_html(accept: str) -> bool:
    """A browser's Accept lists text/html before any JSON type; curl's */* gets JSON."""
    types = [part.split(";", 1)[0].strip().lower() for part in accept.split(",")]
    for media in types:
        if media == "text/html":
            return True
        if media == "application/json" or media.endswith("+json"):
            return False
    return False


def as_html(page: dict[str, Any]) -> bytes:
    rows = "".join(
        f"<li><code>{escape(k)}</code> {escape(v)}</li>" for k, v in page["endpoints"].items()
    )
    links = page.get("doc_links", {})
    docs = "".join(
        f"<li>{escape(k)}: <a href='{escape(links[k])}'>{escape(v)}</a></li>"
        if k in links
        else f"<li>{escape(k)}: {escape(v)}</li>"
        for k, v in page["docs"].items()
    )
    stores = "".join(
        f"<li><code>POST {escape(v)}</code></li>" for v in page.get("stores", {}).values()
    )
    body = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(page['name'])}"
        f"</title></head><body><h1>{escape(page['name'])}</h1>"
        f"<p>{escape(page['description'])}, speaking {escape(page['protocol'])}.</p>"
        f"<h2>Endpoints</h2><ul>{rows}</ul>"
        + (f"<h2>Stores</h2><ul>{stores}</ul>" if stores else "")
        + f"<h2>Docs</h2><ul>{docs}</ul></body></html>"
    )
    return body.encode()
