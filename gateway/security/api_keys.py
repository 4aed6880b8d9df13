"""Static API keys as a credential kind (``server.auth.api_keys`` and ``api_keys_file``).

The config holds ``sha256:<hex>`` of each key, never the key; a presented key is
hashed and compared to every entry in constant time. Keys are high-entropy random
strings (``a2m-gateway hash-key --new``), so a fast hash is the right one: there is
nothing to brute-force. An API key is never kept on the principal: no engine could
check it, so it is never forwarded.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from pathlib import Path

from gateway.config import ApiKeyEntry, AuthConfig, read_api_keys
from gateway.security.credential import CredentialVerifier
from gateway.security.scopes import Principal

log = logging.getLogger("gateway.security.auth")


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


class ApiKeys:
    """The API-key verifier: a token is one of the keys held now, or not an API key."""

    def __init__(self, config: AuthConfig) -> None:
        self.keys = ApiKeyVerifier(config.all_api_keys())
        self._file = ApiKeyFile(config) if config.api_keys_file is not None else None

    async def verify_token(self, token: str) -> Principal | None:
        """The key's principal, or None (never raises: any token may be another kind)."""
        return self.keys.verify(token)

    def describe(self) -> str | None:
        return f"{len(self.keys)} API key(s)" if self.keys else None

    def rereading(self) -> CredentialVerifier | None:
        """The verifier that re-reads ``api_keys_file``, or None without one.

        It goes last in the list: only a token that no kind claimed is worth a
        look at the file, so a valid JWT never costs a stat.
        """
        return None if self._file is None else _KeyFileReread(self, self._file)


class _KeyFileReread:
    """A key added to ``api_keys_file`` since it was last read."""

    def __init__(self, keys: ApiKeys, file: ApiKeyFile) -> None:
        self._keys = keys
        self._file = file

    async def verify_token(self, token: str) -> Principal | None:
        # Off the event loop: a slow mount must not stall every other request.
        entries = await asyncio.to_thread(self._file.reread)
        if entries is None:
            return None
        self._keys.keys = ApiKeyVerifier(entries)
        return self._keys.keys.verify(token)

    def describe(self) -> str | None:
        return None
