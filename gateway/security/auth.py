"""Caller authentication over HTTP (A2M §6.1): `Authorization: Bearer` on every POST.

The :class:`Authenticator` takes the bearer token and asks its credential verifiers
(:class:`gateway.security.credential.CredentialVerifier`) in order; the first that
claims the token decides: a principal, or an :class:`AuthenticationError` when the
token is of its kind but not valid. A token that no verifier claims is refused as
``unknown credential``. The kinds ``server.auth`` configures, in the order asked:

- **Static API keys** (:mod:`gateway.security.api_keys`): hashed, compared to every
  entry in constant time.
- **JWTs** (:mod:`gateway.security.jwt_auth`, imported only with ``server.auth.jwt``):
  PyJWT with configured algorithms only, ``iss``, ``aud``, ``exp`` (required), ``nbf``,
  ``iat``; keys from a JWKS URL (:class:`gateway.security.jwks.JwksCache`), a JWKS
  file, or an HS* shared secret. A JWT principal keeps its token: the credential a
  store with ``scope.forward_credential`` sends the engine.
- **A key added to ``api_keys_file``** since it was read: last, so only a token no
  other kind claimed costs a look at the file.

A new kind is one module with a verifier, added to the list (:func:`verifiers_for`,
or the ``verifiers`` argument for a kind the config does not name). A failure is
answered 401 with ``WWW-Authenticate: Bearer`` before any JSON-RPC processing; its
``reason`` is for the log and never carries the token.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config import AuthConfig, ConfigError, GatewayConfig, is_loopback
from gateway.security.api_keys import ApiKeys, ApiKeyVerifier, generate_api_key, hash_api_key
from gateway.security.credential import AuthenticationError, CredentialVerifier, bearer_token
from gateway.security.scopes import Principal

__all__ = [
    "ApiKeyVerifier",
    "Authenticator",
    "check_exposure",
    "generate_api_key",
    "hash_api_key",
    "verifiers_for",
]


def verifiers_for(config: AuthConfig) -> list[CredentialVerifier]:
    """The verifiers of the kinds ``config`` names, in the order they are asked.

    Raises:
        ConfigError: the JWKS file of server.auth.jwt cannot be read.
    """
    verifiers: list[CredentialVerifier] = []
    keys = ApiKeys(config) if config.all_api_keys() or config.api_keys_file else None
    if keys is not None:
        verifiers.append(keys)
    if config.jwt is not None:
        from gateway.security.jwt_auth import JwtVerifier  # PyJWT and cryptography

        verifiers.append(JwtVerifier(config.jwt))
    reread = keys.rereading() if keys is not None else None
    if reread is not None:
        verifiers.append(reread)
    return verifiers


class Authenticator:
    """Turns an Authorization header into a principal, per ``server.auth``."""

    def __init__(
        self, config: AuthConfig, verifiers: Sequence[CredentialVerifier] | None = None
    ) -> None:
        """``verifiers``: the kinds to ask, in order; default :func:`verifiers_for` (config).

        Raises:
            ConfigError: the JWKS file of server.auth.jwt cannot be read.
        """
        self.enabled = config.enabled
        self.realm = config.realm
        self._verifiers = tuple(verifiers_for(config) if verifiers is None else verifiers)

    def describe(self) -> str:
        """What is accepted, for the startup log (never a key or secret)."""
        kinds = [d for v in self._verifiers if (d := v.describe())]
        return "bearer: " + ", ".join(kinds) if self.enabled else "none"

    async def authenticate(self, authorization: str | None) -> Principal | None:
        """The caller's principal; None when authentication is off.

        Raises:
            AuthenticationError: authentication is on and the credential is missing, bad,
                or of no kind a verifier claims.
        """
        if not self.enabled:
            return None
        token = bearer_token(authorization)
        for verifier in self._verifiers:
            principal = await verifier.verify_token(token)
            if principal is not None:
                return principal
        raise AuthenticationError("unknown credential")

    def challenge(self, error: AuthenticationError) -> str:
        """The WWW-Authenticate value of a 401 (RFC 6750 §3)."""
        if not error.presented:
            return f'Bearer realm="{self.realm}"'
        return f'Bearer realm="{self.realm}", error="invalid_token"'


def check_exposure(config: GatewayConfig, host: str) -> list[str]:
    """Refuse to serve HTTP in a way that would expose memory to the network.

    Returns warnings the caller must log (the explicit escape hatch was taken).

    Raises:
        ConfigError: a non-loopback bind without authentication (and no escape
            hatch), or a scoped store that no caller could ever be scoped for.
    """
    auth = config.server.auth
    warnings: list[str] = []
    if not auth.enabled and not is_loopback(host):
        if not auth.allow_unauthenticated_network:
            raise ConfigError(
                f"refusing to serve on {host!r} without authentication: bind a loopback "
                "address, configure server.auth (api_keys / jwt), or set "
                "server.auth.allow_unauthenticated_network: true if something in front "
                "of the gateway authenticates every caller (see SECURITY.md)"
            )
        warnings.append(
            f"SECURITY: serving on {host!r} WITHOUT AUTHENTICATION "
            "(server.auth.allow_unauthenticated_network is true): anyone who can reach "
            "this port can read every store"
        )
    forwarding = [n for n, s in config.stores.items() if s.scope.forward_credential]
    if forwarding and auth.enabled and auth.jwt is None:
        raise ConfigError(
            f"stores {', '.join(forwarding)} forward the caller's token to the engine, "
            "which needs JWT callers: configure server.auth.jwt"
        )
    if not auth.enabled:
        scoped = [n for n, s in config.stores.items() if s.scope.enforced]
        if scoped:
            raise ConfigError(
                f"stores {', '.join(scoped)} have scope.filters or scope.forward_credential, "
                "which take the caller from server.auth; with auth.mode none every call "
                "would see nothing"
            )
    return warnings
