"""Limits: reported in describe, enforced whoever asks, and the HTTP body's size and pace."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.security.support import (
    BOB_KEY,
    Issuer,
    MemoryConnector,
    acl_docs,
    asgi_client,
    auth_section,
    bearer,
    build_gateway,
    memory_store_config,
    rpc,
)

LIMITS = {
    "max_recall_limit": 20,
    "max_query_length": 50,
    "max_where_keys": 2,
    "max_where_values": 3,
    "max_key_length": 30,
}


@pytest.fixture
async def gateway_and_engine(issuer: Issuer) -> AsyncIterator[tuple[Any, MemoryConnector]]:
    store = memory_store_config()
    store["limits"] = LIMITS
    engine = MemoryConnector(acl_docs())
    gateway = build_gateway(
        {"auth": auth_section(issuer), "max_body_bytes": 4096, "body_timeout_ms": 200},
        {"docs": store},
        {"docs": engine},
    )
    yield gateway, engine
    await gateway.close()


async def test_limits_are_described_and_enforced(
    gateway_and_engine: tuple[Any, MemoryConnector],
) -> None:
    gateway, engine = gateway_and_engine
    async with asgi_client(gateway) as client:

        async def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
            r = await client.post(
                "/a2m/docs",
                content=json.dumps(rpc(method, params)),
                headers={"content-type": "application/json", **bearer(BOB_KEY)},
            )
            assert r.status_code == 200
            body: dict[str, Any] = r.json()
            return body

        d = (await answer("memory/describe", {}))["result"]["limits"]
        for name in ("max_recall_limit", "max_query_length", "max_where_keys", "max_where_values"):
            assert d[name] == LIMITS[name]
        before = engine.calls
        for method, params in (
            ("memory/recall", {"limit": 21}),
            ("memory/timeline", {"limit": 21}),
            ("memory/recall", {"query": "x" * 51}),
            ("memory/recall", {"where": {"key": "a", "lang": "en", "content": "c"}}),
            ("memory/timeline", {"where": {"lang": ["a", "b", "c", "d"]}}),
            ("memory/fetch", {"key": "k" * 31}),
            ("memory/timeline", {"key_prefix": "k" * 31}),
        ):
            assert (await answer(method, params))["error"]["code"] == -32602, params
        assert engine.calls == before  # refused before any engine work


async def test_body_size_is_413_after_authentication(
    gateway_and_engine: tuple[Any, MemoryConnector],
) -> None:
    gateway, _ = gateway_and_engine
    big = json.dumps(rpc("memory/recall", {"query": "q", "pad": "x" * 5000}))
    async with asgi_client(gateway) as client:
        headers = {"content-type": "application/json", **bearer(BOB_KEY)}
        assert (await client.post("/a2m/docs", content=big, headers=headers)).status_code == 413

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):  # no Content-Length: counted as it arrives
                yield b" " * 1000

        r = await client.post("/a2m/docs", content=chunks(), headers=headers)
        assert r.status_code == 413


async def test_a_body_that_never_finishes_is_408(
    gateway_and_engine: tuple[Any, MemoryConnector],
) -> None:
    gateway, _ = gateway_and_engine
    never = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc": "2.0", '
        await never.wait()  # the client stops sending; the gateway must not wait forever
        yield b"}"

    async with asgi_client(gateway) as client:
        headers = {"content-type": "application/json", **bearer(BOB_KEY)}
        r = await asyncio.wait_for(
            client.post("/a2m/docs", content=stalled(), headers=headers), timeout=10
        )
        assert r.status_code == 408
    never.set()
