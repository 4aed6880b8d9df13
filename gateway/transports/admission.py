"""Admission: the one step both HTTP front doors (A2M and MCP) take before a call runs.

In order: the Origin (§8.3.1; the gateway's own try page counts as same-origin),
exactly one Authorization header, the credential (§6.1, failed attempts rate
limited per client address), the caller's rate limit charged before its body is
read, and the body itself: bounded in size, in time, and in bytes buffered over
all requests at once. Each step answers a refusal as a ready Response; none reads
past the step that refused.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from gateway.a2m.jsonrpc import error_body
from gateway.config import ServerConfig
from gateway.observability.client_name import client_name
from gateway.runtime import Gateway
from gateway.security.auth import Authenticator
from gateway.security.credential import AuthenticationError
from gateway.security.ratelimit import RateLimiter
from gateway.security.scopes import Caller, Principal

audit = logging.getLogger("a2m.audit")

JSON = "application/json"

AudienceCheck = Callable[[Principal], None]
"""Raises AuthenticationError when a principal's token is not meant for this door."""


class RequestHead:
    """The request headers admission and the A2M door read, found in one pass over the head.

    Values are latin-1 text as sent (None when absent); ``authorization`` keeps every
    Authorization header, since more than one is refused.
    """

    __slots__ = (
        "authorization",
        "client",
        "content_length",
        "content_type",
        "host",
        "origin",
        "user_agent",
        "version",
    )

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.origin: str | None = None
        self.host: str | None = None
        self.content_type: str | None = None
        self.content_length: str | None = None
        self.version: str | None = None
        self.client: str | None = None
        self.user_agent: str | None = None
        self.authorization: list[bytes] = []
        for key, value in raw:  # the first of each counts, as Starlette's Headers.get
            if key == b"host":
                if self.host is None:
                    self.host = value.decode("latin-1")
            elif key == b"content-type":
                if self.content_type is None:
                    self.content_type = value.decode("latin-1")
            elif key == b"content-length":
                if self.content_length is None:
                    self.content_length = value.decode("latin-1")
            elif key == b"authorization":
                self.authorization.append(value)
            elif key == b"origin":
                if self.origin is None:
                    self.origin = value.decode("latin-1")
            elif key == b"a2m-protocol-version" and self.version is None:
                self.version = value.decode("latin-1")
            elif key == b"x-client-name" and self.client is None:
                self.client = value.decode("latin-1")
            elif key == b"user-agent" and self.user_agent is None:
                self.user_agent = value.decode("latin-1")

    def media_type(self) -> str:
        """The Content-Type without parameters, lower case ('' when absent)."""
        return (self.content_type or "").split(";", 1)[0].strip().lower()


def plain(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps({"error": message}), status_code=status, media_type=JSON, headers=headers
    )


class BodyBudget:
    """Request-body bytes buffered at once, over all requests: a stall cannot grow memory."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self._limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n


class Admission:
    def __init__(
        self,
        gateway: Gateway,
        server: ServerConfig,
        auth: Authenticator,
        origin_permits: Callable[[str | None, str | None], bool],
    ) -> None:
        self._gateway = gateway
        self.auth = auth
        self._origin_permits = origin_permits
        failures = server.auth.failures
        self._failed_auth = RateLimiter(failures.per_second, failures.burst, failures.max_clients)
        self.budget = BodyBudget(server.http.max_inflight_body_bytes)
        self._max_body = server.max_body_bytes
        self._body_timeout_s = server.body_timeout_ms / 1000
        self._anonymous = Caller(network=True)

    async def admit(
        self,
        request: Request,
        *,
        audience: AudienceCheck | None = None,
        challenge_extra: Callable[[], str] | None = None,
        head: RequestHead | None = None,
    ) -> Caller | Response:
        """The caller, or the Response refusing it (403, 400, 401, 429).

        ``head``: the request's headers, when the door has already read them.
        """
        if head is None:
            head = RequestHead(request.scope["headers"])
        if not self._origin_permits(head.origin, head.host):
            return plain(403, "origin not allowed")
        authorization = head.authorization
        if len(authorization) > 1:
            return plain(400, "more than one Authorization header")
        try:
            principal = await self.auth.authenticate(
                authorization[0].decode("latin-1") if authorization else None
            )
            if principal is not None and audience is not None:
                audience(principal)
        except AuthenticationError as exc:
            client = request.client.host if request.client else "unknown"
            wait_ms = self._failed_auth.acquire(client)
            if wait_ms is not None:
                # Limited: no line per attempt, so a flood cannot flood the log either.
                retry = str(max(1, -(-wait_ms // 1000)))
                return plain(429, "too many failed authentications", {"Retry-After": retry})
            # The reason names what was wrong, never the credential.
            audit.info("auth_failed", extra={"reason": exc.reason, "client": client})
            challenge = self.auth.challenge(exc)
            if challenge_extra is not None:
                challenge += challenge_extra()
            return plain(401, "authentication required", {"WWW-Authenticate": challenge})
        named = client_name(head.client, head.user_agent)
        if principal is None and named is None:
            return self._anonymous
        return Caller(network=True, principal=principal, client=named)

    async def charge(self, caller: Caller, store: str | None) -> Response | None:
        """The caller's rate limit, taken before its body is read (a JSON-RPC error if spent).

        The body is never read, so the error's id is null and no method is known.
        """
        err = await self._gateway.ledger.charge(caller, store or self._gateway.default_store)
        if err is None:
            return None
        return Response(error_body(None, err), status_code=200, media_type=JSON)

    async def read_body(
        self, request: Request, head: RequestHead | None = None
    ) -> bytes | Response:
        """The whole body, or the Response refusing it (400, 408, 413, 503).

        Raises:
            starlette.requests.ClientDisconnect: the client left mid-body (nobody to answer).
        """
        length = head.content_length if head is not None else request.headers.get("content-length")
        try:
            async with asyncio.timeout(self._body_timeout_s):
                return await self._read(request, length)
        except TimeoutError:
            return plain(408, "request body not received in time")

    async def _read(self, request: Request, length: str | None) -> bytes | Response:
        max_body = self._max_body
        if length is not None:
            if not length.isdigit():
                return plain(400, "invalid Content-Length")
            if int(length) > max_body:
                return plain(413, f"body larger than {max_body} bytes")
        body = bytearray()
        receive = request.receive  # the ASGI messages themselves: no async generator per call
        try:
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientDisconnect
                if message["type"] != "http.request":
                    continue
                more = message.get("more_body", False)
                chunk = message.get("body", b"")
                if not chunk:
                    continue
                if not self.budget.take(len(chunk)):
                    return plain(503, "server busy", headers={"Retry-After": "1"})
                body += chunk
                if len(body) > max_body:
                    return plain(413, f"body larger than {max_body} bytes")
            return bytes(body)
        finally:
            self.budget.give(len(body))
