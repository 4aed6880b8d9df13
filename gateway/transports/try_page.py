"""The try page: a form in the browser over the gateway's own endpoints (docs/try-page.md).

``GET /try`` (and ``GET /`` for a browser) is a static page from the package:
HTML, one script and one style sheet, no build step and nothing from another
origin. Its script calls the endpoints any client calls (the discovery
documents, ``POST /a2m/<store>``, ``POST /mcp/<store>``) with the credential
typed into the page, which it keeps in memory only. The page itself names no
store: with ``server.auth`` on it lists nothing until the discovery document
accepts the credential.

One route is its own: ``POST /try/preview/<store>``, the mapping preview (the
newest documents as the engine holds them, each beside the record it becomes).
It takes the A2M door's steps in the A2M door's order (admission: Origin,
credential, rate limit, bounded body) and runs through the store's dispatcher,
so it is scoped, audited (method ``gateway/preview``) and timed like a call.

Every answer of these routes carries a strict Content-Security-Policy: scripts,
styles and connections from this origin only, no inline script, no framing.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from gateway.a2m.errors import A2MError, ParseError
from gateway.a2m.jsonrpc import error_body
from gateway.runtime import Gateway
from gateway.transports.admission import Admission, plain
from gateway.transports.routes import route

JSON = "application/json"
STATIC = resources.files("gateway.transports") / "try_static"
ASSETS = {
    "try.js": "text/javascript; charset=utf-8",
    "try.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
"""The page's own files under /try/, by name; nothing else is served from the directory."""

PAGE_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


def _read(name: str) -> bytes:
    return (STATIC / name).read_bytes()


def try_page_response() -> Response:
    """The page itself (read from the package each time: it is small, and never cached)."""
    return Response(_read("try.html"), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


def _json_body(body: bytes) -> Any:
    """Raises ParseError: the body is not JSON (an empty body is no params)."""
    if not body.strip():
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ParseError() from None


def add_try_page(app: Starlette, gateway: Gateway, admission: Admission) -> None:
    """Register /try, its two files and the preview route on `app`."""

    async def page(_: Request) -> Response:
        return try_page_response()

    async def asset(request: Request) -> Response:
        asset: str = request.path_params["asset"]
        media = ASSETS.get(asset)
        if media is None:
            return plain(404, "not found")
        return Response(_read(asset), media_type=media, headers=PAGE_HEADERS)

    async def preview(request: Request) -> Response:
        store: str = request.path_params["store"]
        caller = await admission.admit(request)
        if isinstance(caller, Response):
            return caller
        if store not in gateway.stores and store not in gateway.federations:
            return plain(404, "no such store")  # after authentication, as the A2M door
        ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != JSON:
            return plain(415, "Content-Type must be application/json")
        refused = await admission.charge(caller, store)
        if refused is not None:
            return refused
        body = await admission.read_body(request)
        if isinstance(body, Response):
            return body
        try:
            params = _json_body(body)
            result: dict[str, Any] = await gateway.dispatcher(store).preview(params, caller)
        except A2MError as err:  # the dispatcher maps every failure to one
            return Response(error_body(None, err), media_type=JSON)
        result["mapping"] = gateway.stores[store].config.mapping.model_dump(mode="json")
        return Response(orjson.dumps(result), media_type=JSON, headers=PAGE_HEADERS)

    app.router.routes += [
        route("GET", "/try", page),
        route("GET", "/try/{asset}", asset),
        route("POST", "/try/preview/{store}", preview),
    ]
