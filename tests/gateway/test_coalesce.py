"""One socket write per response (gateway/transports/coalesce.py), on both HTTP parsers.

The socket is a recording stand-in: what is tested is how many writes uvicorn's
protocol, wrapped by the gateway's, hands the transport, not the network.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from gateway.observability.metrics import Metrics
from gateway.transports.coalesce import CoalescingTransport
from gateway.transports.http import create_app
from gateway.transports.uvicorn_config import uvicorn_options
from tests.security.support import (
    MemoryConnector,
    acl_docs,
    build_gateway,
    memory_store_config,
    rpc,
)


class RecordingSocket(asyncio.Transport):
    """The transport a protocol writes to: keeps each write, closes on request."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.done = asyncio.Event()

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self.done.set()

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def test_writes_in_one_loop_step_leave_as_one_and_close_sends_them_first() -> None:
    sock = RecordingSocket()
    transport = CoalescingTransport(sock, asyncio.get_running_loop())
    transport.write(b"head\r\n\r\n")
    transport.write(b"body")
    assert sock.writes == []  # held until the loop's next turn
    await asyncio.sleep(0)
    assert sock.writes == [b"head\r\n\r\nbody"]
    transport.write(b"last")
    transport.close()
    assert sock.writes[-1] == b"last"
    assert sock.closed


async def test_bytes_held_for_a_closed_socket_are_dropped() -> None:
    sock = RecordingSocket()
    transport = CoalescingTransport(sock, asyncio.get_running_loop())
    transport.write(b"late")
    sock.close()
    await asyncio.sleep(0)
    assert sock.writes == []


@pytest.mark.parametrize("protocol", ["httptools", "h11"])
async def test_a_response_reaches_the_socket_in_one_write(protocol: str) -> None:
    gateway = build_gateway(
        {"http": {"protocol": protocol}},
        {"docs": memory_store_config()},
        {"docs": MemoryConnector(acl_docs())},
    )
    cfg = gateway.config.server
    app = create_app(gateway, cfg, Metrics(), bind_host="127.0.0.1")
    config = uvicorn.Config(app, log_config=None, access_log=False, **uvicorn_options(cfg))
    config.load()
    proto = config.http_protocol_class(  # type: ignore[call-arg]
        config=config, server_state=ServerState(), app_state={}
    )
    sock = RecordingSocket()
    proto.connection_made(sock)
    body = json.dumps(rpc("memory/describe", {})).encode()
    proto.data_received(
        b"POST /a2m/docs HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    async with asyncio.timeout(20):
        await sock.done.wait()
    await asyncio.sleep(0)  # anything written in a later step would show up now
    assert len(sock.writes) == 1
    head, _, answer = sock.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert json.loads(answer)["id"] == 1
    proto.connection_lost(None)
