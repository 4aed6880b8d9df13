"""Caller authentication over HTTP (A2M §6.1): `Authorization: Bearer` on every POST.

Two kinds of credential, both from ``server.auth``:

- **Static API keys.** The config holds ``sha256:<hex>`` of each key, never
  the key; a presented key is hashed and compared to every entry in constant
  time. Keys are high-entropy random strings (``a2m-gateway hash-key --new``),
  so a fast hash is the right one: there is nothing to brute-force.
- **JWTs**, verified by PyJWT: the signature with a configured algorithm only
  (never ``none``, never an algorithm the config does not list; HS* and
  asymmetric algorithms cannot be mixed), ``iss``, ``aud``, ``exp`` (required),
  ``nbf``, ``iat`` (integers only), with a bounded leeway. Keys come from a
  JWKS URL (:class:`gateway.security.jwks.JwksCache`: cached, fetched by one request at a time, a
  failure or an unknown ``kid`` costing at most one fetch per cooldown), a
  JWKS file, or an HS* shared secret.

A failure is an :class:`AuthenticationError`; the transport answers 401 with
``WWW-Authenticate: Bearer`` before any JSON-RPC processing. Its ``reason`` is
for the log and never carries the token.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.config import (
    ApiKeyEntry,
    AuthConfig,
    ConfigError,
    GatewayConfig,
    is_loopback,
    read_api_keys,
)
from gateway.security.credential import AuthenticationError, bearer_token
from gateway.security.scopes import Principal

if TYPE_CHECKING:
    from gateway.security.jwt_auth import JwtVerifier

log = logging.getLogger(__name__)


def hash_api_key(key: str) -> str:
    """The config form of an API key: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_api_key() -> str:
    """A new random API key (256 bits); shown once, stored only as its hash."""
    return "a2m_" + secrets.token_urlsafe(32)


class ApiKeyVerifier:
    """Static API keys, compared by hash in constant time."""

    def __init__(self, entries: list[ApiKeyEntry]) -> None:
        self._entries = [(bytes.fromhex(e.hash.split(":", 1)[1]), e) for e in entries]

    def __len__(self) -> int:
        return len(self._entries)

    def verify(self, token: str) -> Principal | None:
        """The principal of a known key, else None."""
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        found: ApiKeyEntry | None = None
        # Every entry is compared, so timing says nothing about which (if any) matched.
        for expected, entry in self._entries:
            if hmac.compare_digest(digest, expected):
                found = entry
        if found is None:
            return None
        # The key itself is not kept: no engine could check it, so it is never forwarded.
        return Principal(
            subject=found.subject, claims={**found.claims, "sub": found.subject}, method="api_key"
        )


def _mtime(path: str) -> float | None:
    try:
        return Path(path).stat().st_mtime
    except OSError:
        return None


class ApiKeyFile:
    """``auth.api_keys_file`` after start: re-read when a key matches nothing and it changed.

    The same rule as ``jwt.jwks_file`` (docs/configuration.md): a key added to
    the file works without a restart; a removed key stops working at the next
    re-read or restart.
    """

    def __init__(self, config: AuthConfig) -> None:
        assert config.api_keys_file is not None
        self._config = config
        self._path = config.api_keys_file
        self._mtime = _mtime(self._path)  # the load step has just read it

    def reread(self) -> list[ApiKeyEntry] | None:
        """Every key (inline and file) when the file changed and is valid, else None.

        Blocking (a stat, maybe a read): callers run it off the event loop.
        """
        mtime = _mtime(self._path)
        if mtime is None or mtime == self._mtime:
            return None
        try:
            keys = self._config.with_file_keys(read_api_keys(self._path)).all_api_keys()
        except ValueError as exc:
            log.warning("%s; keeping the keys read before", exc)
            return None
        self._mtime = mtime
        return keys


class Authenticator:
    """Turns an Authorization header into a principal, per ``server.auth``."""

    def __init__(self, config: AuthConfig) -> None:
        self.enabled = config.enabled
        self.realm = config.realm
        self._keys = ApiKeyVerifier(config.all_api_keys())
        self._key_file = ApiKeyFile(config) if config.api_keys_file is not None else None
        self._jwt: JwtVerifier | None = None
        if config.jwt is not None:
            from gateway.security.jwt_auth import JwtVerifier  # PyJWT and cryptography

            self._jwt = JwtVerifier(config.jwt)

    def describe(self) -> str:
        """What is accepted, for the startup log (never a key or secret)."""
        kinds = []
        if self._keys:
            kinds.append(f"{len(self._keys)} API key(s)")
        if self._jwt is not None:
            kinds.append(self._jwt.describe())
        return "bearer: " + ", ".join(kinds) if self.enabled else "none"

    async def authenticate(self, authorization: str | None) -> Principal | None:
        """The caller's principal; None when authentication is off.

        Raises:
            AuthenticationError: authentication is on and the credential is missing or bad.
        """
        if not self.enabled:
            return None
        token = bearer_token(authorization)
        if self._keys or self._key_file is not None:
            principal = await self._verify_key(token)
            if principal is not None:
                return principal
        if self._jwt is not None and token.count(".") == 2:
            return await self._jwt.verify(token)
        raise AuthenticationError("unknown credential")

    async def _verify_key(self, token: str) -> Principal | None:
        principal = self._keys.verify(token)
        if principal is not None or self._key_file is None or token.count(".") == 2:
            return principal  # a JWT-shaped token is no reason to look at the key file
        # Off the event loop: a slow mount must not stall every other request.
        keys = await asyncio.to_thread(self._key_file.reread)
        if keys is None:
            return None
        self._keys = ApiKeyVerifier(keys)
        return self._keys.verify(token)

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
