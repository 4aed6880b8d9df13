"""JWT bearer tokens from one issuer, verified by PyJWT (``server.auth.jwt``).

The signature with a configured algorithm only (never ``none``, never an
algorithm the config does not list), ``iss``, ``aud``, ``exp`` (required),
``nbf``, ``iat`` (integers only), with a bounded leeway. Keys come from a JWKS
URL (:class:`gateway.security.jwks.JwksCache`), a JWKS file, or an HS* shared
secret. Imported only when the config has ``server.auth.jwt``: PyJWT brings
``cryptography``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from pathlib import Path
from typing import Any

import jwt
from pydantic import SecretStr

from gateway.config import ConfigError, JwtConfig
from gateway.security.credential import AuthenticationError
from gateway.security.jwks import JwksCache, JwksFetchError, signing_keys
from gateway.security.scopes import Principal

log = logging.getLogger("gateway.security.auth")


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
    """JWTs from one issuer: the credential verifier for tokens in JWS compact form."""

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

    async def verify_token(self, token: str) -> Principal | None:
        """The principal of a valid JWT; None for a token not in JWS compact form.

        Compact form (RFC 7515 §7.1) is three base64url parts joined by dots: any
        other token is another kind's, and this verifier says nothing about it.

        Raises:
            AuthenticationError: a compact-form token that :meth:`verify` refuses.
        """
        if token.count(".") != 2:
            return None
        return await self.verify(token)

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
