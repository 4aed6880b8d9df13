"""The credential a request presents: `Authorization: Bearer <token>` (RFC 6750).

A missing or bad credential is an :class:`AuthenticationError`; the transport answers
401 with ``WWW-Authenticate: Bearer`` before any JSON-RPC processing. Its ``reason``
is for the log and never carries the token.

Each kind of credential (API keys, JWTs, ...) is a :class:`CredentialVerifier`: it
answers "who is this?" for a token, or says the token is not of its kind. The
:class:`gateway.security.auth.Authenticator` asks its verifiers in order and knows
nothing of any token's format.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.security.scopes import Principal

_BEARER = re.compile(r"^[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*) *$")
"""RFC 6750 §2.1: `Bearer` then one b64token."""
_MAX_HEADER = 32_768


class AuthenticationError(Exception):
    """The request carries no valid credential; answered 401 before any JSON-RPC processing."""

    def __init__(self, reason: str, *, presented: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.presented = presented
        """False when no credential was sent at all (RFC 6750: no error attribute then)."""


class CredentialVerifier(Protocol):
    """One kind of credential: who a bearer token stands for.

    Modelled on the MCP SDK's ``TokenVerifier`` and Starlette's
    ``AuthenticationBackend``. A principal that an engine can check itself
    carries the token in ``Principal.credential``; only such principals can use
    a store with ``scope.forward_credential``.
    """

    async def verify_token(self, token: str) -> Principal | None:
        """The principal `token` stands for; None when the token is not of this kind.

        Raises:
            AuthenticationError: the token is of this kind but not valid (the list
                stops there: no later verifier is asked).
        """
        ...

    def describe(self) -> str | None:
        """What this verifier accepts, for the startup log (never a key or secret);
        None when it adds nothing to say."""
        ...


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header.

    Raises:
        AuthenticationError: the header is missing, another scheme, or malformed.
    """
    if authorization is None or not authorization.strip():
        raise AuthenticationError("no credential", presented=False)
    if len(authorization) > _MAX_HEADER:
        raise AuthenticationError("credential header too long")
    m = _BEARER.match(authorization.strip())
    if m is None:
        raise AuthenticationError("unsupported credential scheme")
    return m.group(1)
