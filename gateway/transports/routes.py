"""Routes of the HTTP app: Starlette's, each answering exactly the one method it names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Endpoint = Callable[[Request], Awaitable[Response]]


def route(method: str, path: str, endpoint: Endpoint) -> Route:
    """``method`` on ``path``; a GET route does not also answer HEAD (405, like any other)."""
    made = Route(path, endpoint, methods=[method])
    made.methods = {method}
    return made
