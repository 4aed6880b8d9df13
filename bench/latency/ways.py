"""The ways the latency benchmark sends its workload: each way's client, and the load driver.

Each block opens its way's clients afresh, so every way pays the same setup; the floor
servers (bench/latency/floor.py) are started here too, one process per floor way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from bench.latency import peer as peer_mod
from bench.latency.workload import (
    JSON_HEADERS,
    MCP_HEADERS,
    MODERN_HEADERS,
    Item,
    elasticsearch_body,
    mcp_search,
    opensearch_body,
    recall_call,
    recall_ok,
)
from bench.process import GatewayProcess, spawn_until_ready

FLOORS = {
    "floor": "official",
    "floor-gateway-http": "gateway-http",
    "floor-raw": "raw",
    "floor-none": "none",
}
"""The floor ways (bench/latency/floor.py) and the engine client each uses."""


def start_floor(way: str, url: str, index: str, log: Path) -> GatewayProcess:
    """A floor server (bench/latency/floor.py) with the way's engine client."""

    def command(port: int) -> list[str]:
        return [
            *(sys.executable, "-m", "bench.latency.floor", "--port", str(port)),
            *("--opensearch-url", url, "--index", index, "--client", FLOORS[way]),
        ]

    return spawn_until_ready(command, os.environ, log, health_path="/readyz", what=way)


Call = Callable[[int, Item], Awaitable[bool]]
T = TypeVar("T")


async def drive(
    call: Callable[[int, T], Awaitable[bool]], items: Sequence[T], concurrency: int
) -> tuple[list[float], float, int]:
    """Send every item with ``concurrency`` workers: (latencies, wall seconds, errors); a
    call that raises counts as an error."""
    next_index = 0
    latencies: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal next_index, errors
        while next_index < len(items):
            i = next_index
            next_index += 1
            start = time.perf_counter()
            try:
                ok = await call(i, items[i])
            except Exception:
                ok = False
            latencies.append(time.perf_counter() - start)
            if not ok:
                errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - start, errors


class Ways:
    """The clients of each way, opened once per block so every way pays the same setup."""

    def __init__(
        self, args: argparse.Namespace, index: str, gateway_url: str, peer_url: str | None
    ) -> None:
        self.args = args
        self.index = index
        self.gateway_url = gateway_url
        self.peer_url = peer_url
        self.floor_urls: dict[str, str] = {}
        """The base URL of each floor server (bench/latency/floor.py) started."""

    async def block(
        self, way: str, items: Sequence[Item], warmup: Sequence[Item], concurrency: int
    ) -> tuple[list[float], float, int]:
        if way in ("direct", "es-direct"):
            return await self._direct(way, items, warmup, concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
        async with aiohttp.ClientSession(connector=connector) as http:
            call: Call
            if way in ("gateway", "es-gateway", *FLOORS):
                store = "opensearch" if way != "es-gateway" else "elasticsearch"
                url = self.floor_urls[way] if way in FLOORS else f"{self.gateway_url}/a2m/{store}"

                async def call(i: int, item: Item) -> bool:
                    body = recall_call(item, i)
                    async with http.post(url, data=body, headers=JSON_HEADERS) as r:
                        raw = await r.read()
                    return r.status == 200 and recall_ok(raw)

            elif way == "mcp":
                url = f"{self.gateway_url}/mcp/opensearch"
                headers = {**MCP_HEADERS, **MODERN_HEADERS}

                async def call(i: int, item: Item) -> bool:
                    body = mcp_search(item, i)
                    async with http.post(url, data=body, headers=headers) as r:
                        raw = await r.read()
                    return r.status == 200 and peer_mod.answer_ok(raw)

            elif way == "peer":
                assert self.peer_url is not None
                url = f"{self.peer_url}/mcp"

                async def call(i: int, item: Item) -> bool:
                    body = peer_mod.tool_call(self.index, opensearch_body(item), i)
                    async with http.post(url, data=body, headers=MCP_HEADERS) as r:
                        raw = await r.read()
                    return r.status == 200 and peer_mod.answer_ok(raw)

            else:
                raise ValueError(way)
            await drive(call, warmup, concurrency)
            return await drive(call, items, concurrency)

    async def _direct(
        self, way: str, items: Sequence[Item], warmup: Sequence[Item], concurrency: int
    ) -> tuple[list[float], float, int]:
        client: Any
        if way == "direct":
            from opensearchpy import AsyncOpenSearch

            client = AsyncOpenSearch(
                hosts=[self.args.opensearch_url], maxsize=max(concurrency, 10), timeout=30
            )
            spell = opensearch_body
        else:
            from elasticsearch import AsyncElasticsearch

            client = AsyncElasticsearch(
                self.args.elasticsearch_url,
                request_timeout=30,
                connections_per_node=max(concurrency, 10),
            )
            spell = elasticsearch_body
        try:

            async def call(i: int, item: Item) -> bool:
                response = await client.search(index=self.index, body=spell(item))
                return "hits" in response

            await drive(call, warmup, concurrency)
            return await drive(call, items, concurrency)
        finally:
            await client.close()
