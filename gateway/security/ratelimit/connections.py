"""A few connections of redis-py's asyncio client, leased to one call at a time.

The shared rate limit sends one command per A2M call, so the command layer's
per-call work (a pool that probes each connection it hands out, retry and
observability wrappers, argument encoding) would cost more than the script
itself. Here a call takes an idle connection (or makes one, up to
``max_connections``), writes a command packed once in RESP, and reads the reply
with the client's own parser (hiredis when installed). A call that fails or is
cancelled at its deadline closes its connection: its reply could still arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.config import SharedQuotaConfig


def pack(*parts: bytes) -> bytes:
    """One command in RESP: an array of bulk strings."""
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


class RedisConnections:
    """Connections to one Redis, each used by one call at a time."""

    def __init__(self, pool: ConnectionPool, max_connections: int) -> None:
        self._pool = pool  # URL parsing, TLS and credentials: the client's own
        self._idle: list[AbstractConnection] = []
        self._slots = asyncio.Semaphore(max_connections)

    @classmethod
    def from_config(cls, config: SharedQuotaConfig) -> RedisConnections:
        """Nothing is connected yet: the first call connects, under its own deadline."""
        options: dict[str, Any] = {
            # None: no timer per read; the caller's deadline bounds each call instead.
            "socket_timeout": None,
            "socket_connect_timeout": config.timeout_ms / 1000,
            "retry": Retry(NoBackoff(), 0),
        }
        if config.username is not None:
            options["username"] = config.username
        if config.password is not None:
            options["password"] = config.password.get_secret_value()
        if config.ca_certs is not None:
            options["ssl_ca_certs"] = config.ca_certs
        return cls(ConnectionPool.from_url(config.url, **options), config.max_connections)

    def _connection(self) -> AbstractConnection:
        pool = self._pool
        return pool.connection_class(**pool.connection_kwargs)

    async def call(self, command: bytes) -> Any:
        """Send one packed command and return its reply.

        Raises:
            redis.exceptions.RedisError: an error reply (NoScriptError, ...), or a
                connection that failed (ConnectionError, AuthenticationError, ...).
            OSError: the socket failed.
        """
        async with self._slots:
            conn = self._idle.pop() if self._idle else self._connection()
            try:
                await conn.send_packed_command(command, check_health=False)
                reply = await conn.read_response()
            except RedisError as exc:
                if not _is_error_reply(exc):
                    await _close(conn)
                    raise
                self._idle.append(conn)  # an error reply leaves the connection usable
                raise
            except BaseException:  # cancelled at its deadline, or the socket failed
                await _close(conn)
                raise
            self._idle.append(conn)
            return reply

    async def drop_idle(self) -> None:
        """Close every idle connection (they led to a server that just failed)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await _close(conn)

    async def close(self) -> None:
        await self.drop_idle()
        with contextlib.suppress(RedisError, OSError):
            await self._pool.disconnect()


def _is_error_reply(exc: RedisError) -> bool:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import ResponseError

    return isinstance(exc, ResponseError) and not isinstance(exc, RedisConnectionError)


async def _close(conn: AbstractConnection) -> None:
    with contextlib.suppress(RedisError, OSError):
        await conn.disconnect(nowait=True)
