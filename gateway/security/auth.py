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
import json
import logging
import re
import secrets
import ssl
from pathlib import Path
from typing import Any

import jwt
from pydantic import SecretStr

from gateway.config import (
    ApiKeyEntry,
    AuthConfig,
    ConfigError,
    GatewayConfig,
    JwtConfig,
    is_loopback,
    read_api_keys,
)
from gateway.security.jwks import JwksCache, JwksFetchError, signing_keys
from gateway.security.scopes import Principal

log = logging.getLogger(__name__)

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


def hash_api_key(key: str) -> str:
    """The config form of an API key: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_api_key() -> str:
    """A new random API key (256 bits); shown once, stored only as its hash."""
    return "a2m_" + secrets.token_urlsafe(32)


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


def _trust(ca_file: str | None) -> ssl.SSLContext | None:
    """The TLS trust for the JWKS URL: the system's, or a private CA's.

    Raises:
        ConfigError: the CA file cannot be read.
    """
    if ca_file is None:
        return None
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError):
        raise ConfigError("server.auth.jwt.jwks_ca_file: not a readable PEM CA bundle") from None


class JwtVerifier:
    """JWTs from one issuer."""

    def __init__(self, config: JwtConfig) -> None:
        self._cfg = config
        self._algorithms = list(config.algorithms)
        self.jwks: JwksCache | None = None
        self._file_keys: list[jwt.PyJWK] = []
        self._file_mtime: float | None = None
        if config.jwks_url is not None:
            self.jwks = JwksCache(
                config.jwks_url,
                lifespan_s=config.jwks_cache_s,
                cooldown_s=config.jwks_cooldown_s,
                timeout_s=config.jwks_timeout_ms / 1000,
                ssl_context=_trust(config.jwks_ca_file),
            )
        elif config.jwks_file is not None:
            self._load_file()

    def _load_file(self) -> None:
        """Read the JWKS file (again, when it changed: a rotated mounted secret).

        Raises:
            ConfigError: the file cannot be read or holds no usable key.
        """
        assert self._cfg.jwks_file is not None
        path = Path(self._cfg.jwks_file)
        try:
            mtime = path.stat().st_mtime
            if mtime == self._file_mtime:
                return
            keys = signing_keys(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, JwksFetchError):
            raise ConfigError("server.auth.jwt.jwks_file: not a readable JWKS") from None
        self._file_keys = keys
        self._file_mtime = mtime

    def _pick(self, keys: list[jwt.PyJWK], kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            # Without a kid only an unambiguous set will do.
            return keys[0] if len(keys) == 1 else None
        return next((k for k in keys if k.key_id == kid), None)

    async def _signing_key(self, kid: str | None) -> jwt.PyJWK | str:
        """The key to verify with.

        Raises:
            AuthenticationError: no key for this token.
        """
        if self._cfg.secret is not None:
            return self._cfg.secret.get_secret_value()
        if self.jwks is not None:
            key = await self.jwks.key(kid, lambda keys: self._pick(keys, kid))
            if key is None and self.jwks.unavailable:
                raise AuthenticationError("JWKS unavailable")
        else:
            key = self._pick(self._file_keys, kid)
            if key is None:
                try:
                    # Off the event loop: a slow mount must not stall every other request.
                    await asyncio.to_thread(self._load_file)
                except ConfigError:
                    log.warning("JWKS file unreadable; refusing the token")
                    raise AuthenticationError("JWKS unavailable") from None
                key = self._pick(self._file_keys, kid)
        if key is None:
            raise AuthenticationError("no JWKS key for the token's kid")
        return key

    def describe(self) -> str:
        c = self._cfg
        source = "secret" if c.secret else ("JWKS URL" if c.jwks_url else "JWKS file")
        return f"JWT from {c.issuer} ({', '.join(c.algorithms)}, {source})"

    def _check_party(self, claims: dict[str, Any]) -> None:
        """With ``authorized_parties``, the client the token was issued to must be listed.

        An audience alone does not say which client asked: Keycloak adds it to other
        clients' tokens too (an audience mapper on them, or, by its default `roles`
        scope, to any client whose users hold roles of a client named like the audience).

        Raises:
            AuthenticationError: `azp` (or RFC 9068 `client_id`) is missing or not listed.
        """
        parties = self._cfg.authorized_parties
        if not parties:
            return
        party = claims.get("azp", claims.get("client_id"))
        if not isinstance(party, str) or party not in parties:
            raise AuthenticationError("JWT issued to a client not in authorized_parties")

    async def verify(self, token: str) -> Principal:
        """The principal a valid token stands for.

        Raises:
            AuthenticationError: malformed, unsigned, wrongly signed, expired, not yet
                valid, or for another issuer or audience.
        """
        if len(token) > self._cfg.max_token_bytes:
            raise AuthenticationError("token too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationError("not a JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            # Covers `none`: only configured algorithms are ever considered.
            raise AuthenticationError("JWT algorithm not allowed")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise AuthenticationError("JWT kid is not a string")
        key = await self._signing_key(kid)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                audience=self._cfg.audience,
                issuer=self._cfg.issuer,
                leeway=self._cfg.leeway_s,
                options={
                    "require": ["exp", "iss", "aud"],
                    "verify_signature": True,
                    "verify_exp": True,
                    "verify_nbf": True,
                    "verify_iat": True,
                    "verify_aud": True,
                    "verify_iss": True,
                    "enforce_minimum_key_length": True,
                },
            )
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"JWT rejected: {type(exc).__name__}") from None
        for name in ("exp", "nbf", "iat"):
            value = claims.get(name)
            # PyJWT takes int() of these: "9999999999" or 1e30 would pass as times.
            if name in claims and (not isinstance(value, int) or isinstance(value, bool)):
                raise AuthenticationError(f"JWT {name} is not an integer")
        self._check_party(claims)
        subject = claims.get(self._cfg.subject_claim)
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError(f"JWT has no string {self._cfg.subject_claim!r} claim")
        return Principal(subject=subject, claims=claims, method="jwt", credential=SecretStr(token))


class Authenticator:
    """Turns an Authorization header into a principal, per ``server.auth``."""

    def __init__(self, config: AuthConfig) -> None:
        self.enabled = config.enabled
        self.realm = config.realm
        self._keys = ApiKeyVerifier(config.all_api_keys())
        self._key_file = ApiKeyFile(config) if config.api_keys_file is not None else None
        self._jwt = JwtVerifier(config.jwt) if config.jwt is not None else None

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
