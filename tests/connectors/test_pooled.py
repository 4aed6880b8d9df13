"""Which client failures are a dead connection (connectors/pooled.py): the classifier alone.

The resend itself runs against real engines in test_recovery.py.
"""

from __future__ import annotations

import socket

import aiohttp
import elastic_transport
import opensearchpy
import pytest
from aiohttp.client_reqrep import ConnectionKey

from connectors.pooled import dead_connection

_KEY = ConnectionKey("127.0.0.1", 9200, False, True, None, None, None)


def _refused() -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorError(_KEY, ConnectionRefusedError(111, "refused"))


def _as_clients_raise(cause: Exception) -> list[BaseException]:
    """The error as elastic-transport and opensearch-py hand it on."""
    return [
        elastic_transport.ConnectionError(str(cause), errors=(cause,)),
        opensearchpy.ConnectionError("N/A", str(cause), cause),
    ]


@pytest.mark.parametrize(
    "cause",
    [
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientOSError(104, "Connection reset by peer"),
    ],
    ids=["closed", "reset"],
)
def test_a_peer_closing_or_resetting_the_connection_is_a_dead_connection(
    cause: Exception,
) -> None:
    assert all(dead_connection(e) for e in _as_clients_raise(cause))


@pytest.mark.parametrize(
    "cause",
    [_refused(), TimeoutError(), socket.gaierror(-2, "unknown host")],
    ids=["refused", "timeout", "dns"],
)
def test_a_failed_connect_or_a_timeout_is_not(cause: Exception) -> None:
    assert not any(dead_connection(e) for e in _as_clients_raise(cause))


def _wrapped() -> None:
    try:
        raise aiohttp.ServerDisconnectedError()
    except aiohttp.ClientError:
        raise RuntimeError("wrapped") from None


def test_the_cause_is_found_through_the_exception_chain() -> None:
    with pytest.raises(RuntimeError) as info:
        _wrapped()
    assert dead_connection(info.value)  # __context__ is kept even without a cause
