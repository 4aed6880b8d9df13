"""Caller authentication settings (``server.auth``): API keys held as hashes, and JWTs."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.config.base import StrictModel, is_loopback

_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


class ApiKeyEntry(StrictModel):
    """One static API key, held as a hash: the key itself never sits in a config file."""

    subject: str = Field(min_length=1, max_length=256, description="the principal (`sub`)")
    hash: str = Field(description="'sha256:<hex>' of the key; `a2m-gateway hash-key` prints it")
    claims: dict[str, Any] = Field(
        default_factory=dict, description="extra claims, e.g. {groups: [team-a]}"
    )

    @field_validator("hash")
    @classmethod
    def _hash_form(cls, v: str) -> str:
        v = v.strip().lower()
        if not _HASH.match(v):
            raise ValueError("must be 'sha256:' followed by 64 hex digits (a2m-gateway hash-key)")
        return v


JwtAlgorithm = Literal[
    "HS256",
    "HS384",
    "HS512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
]
"""Never `none`: an unsigned token is not a credential."""


class JwtConfig(StrictModel):
    """JWT bearer tokens, verified with PyJWT: signature, issuer, audience, exp, nbf."""

    issuer: str = Field(min_length=1)
    audience: list[str] = Field(min_length=1)
    algorithms: list[JwtAlgorithm] = Field(min_length=1)
    jwks_url: str | None = Field(default=None, description="https URL of the issuer's JWKS")
    jwks_file: str | None = Field(default=None, description="a JWKS JSON file (mounted)")
    jwks_ca_file: str | None = Field(
        default=None,
        description="PEM CA bundle for the JWKS URL's certificate (default: the system's)",
    )
    secret: SecretStr | None = Field(default=None, description="HS* shared secret, >= 32 bytes")
    leeway_s: float = Field(default=30, ge=0, le=300, description="clock skew for exp/nbf/iat")
    jwks_cache_s: float = Field(default=300, gt=0)
    jwks_cooldown_s: float = Field(
        default=30, ge=0, description="minimum gap between refetches for an unknown kid"
    )
    jwks_timeout_ms: int = Field(default=5000, gt=0)
    subject_claim: str = Field(default="sub", min_length=1)
    authorized_parties: list[str] = Field(
        default_factory=list,
        description="when set, `azp` (or RFC 9068 `client_id`) must be one of these clients",
    )
    max_token_bytes: int = Field(default=16_384, gt=0)

    @field_validator("audience", mode="before")
    @classmethod
    def _one_audience(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _keys(self) -> JwtConfig:
        hmac = {a for a in self.algorithms if a.startswith("HS")}
        if hmac and len(hmac) != len(self.algorithms):
            # One key source per issuer; mixing is how algorithm-confusion attacks start.
            raise ValueError("jwt.algorithms: do not mix HS* with asymmetric algorithms")
        if hmac:
            if self.secret is None:
                raise ValueError("jwt: HS* algorithms need jwt.secret")
            if self.jwks_url or self.jwks_file:
                raise ValueError("jwt: HS* algorithms take jwt.secret, not a JWKS")
            if len(self.secret.get_secret_value().encode()) < 32:
                raise ValueError("jwt.secret must be at least 32 bytes")
        else:
            if self.secret is not None:
                raise ValueError("jwt.secret applies to HS* algorithms only")
            if (self.jwks_url is None) == (self.jwks_file is None):
                raise ValueError("jwt: set exactly one of jwks_url, jwks_file")
            if self.jwks_url is not None:
                from urllib.parse import urlsplit

                url = urlsplit(self.jwks_url)
                if url.scheme != "https" and not (
                    url.scheme == "http" and is_loopback(url.hostname or "")
                ):
                    raise ValueError("jwt.jwks_url must be https (http only on loopback)")
            if self.jwks_ca_file is not None and self.jwks_url is None:
                raise ValueError("jwt.jwks_ca_file applies to jwks_url only")
        return self


class FailedAuthLimit(StrictModel):
    """A token bucket per client address charged by each failed authentication.

    An empty bucket answers 429 without a log line, so a flood of bad tokens
    costs neither a 401 nor an audit line each; valid credentials always pass.
    """

    per_second: float = Field(default=1.0, gt=0)
    burst: int = Field(default=20, gt=0)
    max_clients: int = Field(default=10_000, gt=0, description="addresses tracked (LRU)")


class AuthConfig(StrictModel):
    """Caller authentication over HTTP (A2M §6.1). stdio and in-process are local (§6)."""

    mode: Literal["none", "bearer"] = Field(
        default="none",
        description="bearer: every POST needs `Authorization: Bearer`; defaults to bearer "
        "as soon as api_keys, api_keys_file or jwt is set",
    )
    api_keys: list[ApiKeyEntry] = Field(default_factory=list)
    api_keys_file: str | None = Field(
        default=None, description="YAML/JSON list of api_keys entries (a mounted secret)"
    )
    jwt: JwtConfig | None = None
    allow_unauthenticated_network: bool = Field(
        default=False,
        description="escape hatch: mode none on a non-loopback bind (logged as a warning)",
    )
    realm: str = Field(default="a2m", pattern=r"^[A-Za-z0-9 ._-]{1,64}$")
    failures: FailedAuthLimit = Field(default_factory=FailedAuthLimit)
    _file_keys: list[ApiKeyEntry] = PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _infer_mode(cls, data: Any) -> Any:
        # Configuring a credential and forgetting `mode` must never leave the door open.
        if (
            isinstance(data, dict)
            and "mode" not in data
            and (data.get("api_keys") or data.get("api_keys_file") or data.get("jwt"))
        ):
            data = {**data, "mode": "bearer"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> AuthConfig:
        if self.mode == "none":
            if self.api_keys or self.api_keys_file or self.jwt:
                raise ValueError(
                    "auth.mode is none but credentials are configured; set mode: bearer"
                )
            return self
        if not (self.api_keys or self.api_keys_file or self.jwt):
            raise ValueError("auth.mode bearer needs api_keys, api_keys_file or jwt")
        self._unique_hashes()
        return self

    def _unique_hashes(self) -> None:
        hashes = [k.hash for k in self.all_api_keys()]
        if len(hashes) != len(set(hashes)):
            raise ValueError("auth.api_keys: the same key hash appears twice")

    def with_file_keys(self, entries: list[ApiKeyEntry]) -> AuthConfig:
        """This config with the entries read from ``api_keys_file`` (by the load step).

        Raises:
            ValueError: nothing to authenticate with, or a hash that appears twice.
        """
        copy = self.model_copy()
        copy._file_keys = list(entries)
        if not (copy.api_keys or copy._file_keys or copy.jwt):
            raise ValueError("auth.mode bearer needs api_keys, api_keys_file or jwt")
        copy._unique_hashes()
        return copy

    @property
    def enabled(self) -> bool:
        return self.mode == "bearer"

    def all_api_keys(self) -> list[ApiKeyEntry]:
        """The inline keys and those of api_keys_file."""
        return [*self.api_keys, *self._file_keys]


def parse_api_keys(data: Any) -> list[ApiKeyEntry]:
    """The entries of an already-loaded API-key file; errors never quote its content.

    Raises:
        ValueError: not a list, or an entry is invalid.
    """
    if not isinstance(data, list):
        raise ValueError("auth.api_keys_file must hold a list of {subject, hash, claims}")
    entries = []
    for i, item in enumerate(data):
        try:
            entries.append(ApiKeyEntry.model_validate(item))
        except ValidationError:
            raise ValueError(f"auth.api_keys_file: entry {i} is invalid") from None
    return entries
