"""A node back from the dead is used again within the watcher's pace, not the breaker's wait.

OpenSearch behind a fault proxy: the proxy resets every connection until the breaker
opens with a wait far longer than the test, then lets traffic through. The store's
watcher pings the engine while the breaker is open; its first good answer lets the next
call probe. Without it every call in the test would be refused (``circuit_open``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from bench.soak.proxy import Fault, relay_to
from gateway.config import parse_config
from gateway.resilience import BreakerState
from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.connectors.conftest import INDEX, Loaded
from tests.support.resilience import state

pytestmark = [pytest.mark.opensearch, pytest.mark.integration]
QUERY = {"query": "vitamin D deficiency"}


async def test_a_node_back_is_used_again_at_the_watchers_pace(os_loaded: Loaded) -> None:
    async with relay_to(os_loaded.url) as proxy:
        store = {
            "backend": "opensearch",
            "index": INDEX,
            "connection": {"hosts": [proxy.url], "retries": 0},
            "mapping": {"id": "doc_id", "content": "text"},
            "search": {"mode": "lexical", "text_fields": ["title", "text"]},
            "request_timeout_ms": 5000,
            "resilience": {
                "breaker": {
                    "failure_threshold": 2,
                    "open_ms": 60_000,
                    "max_open_ms": 60_000,
                    "watch_ms": 100,
                }
            },
        }
        gateway = Gateway(parse_config({"stores": {"s": store}}))
        client = InProcessClient(gateway.dispatcher())
        guard = gateway.stores["s"].guard
        try:
            assert (await client.call("memory/recall", QUERY))["records"]
            proxy.fault = Fault("reset")
            for _ in range(2):
                with pytest.raises(A2MRemoteError) as info:
                    await client.call("memory/recall", QUERY)
                assert info.value.data["reason"] == "engine_unavailable"
            assert state(guard) is BreakerState.OPEN
            await asyncio.sleep(0.3)  # the watcher's pings meet the same resets
            assert state(guard) is BreakerState.OPEN
            proxy.fault = Fault()
            back = time.monotonic()
            answered, refusals = None, set()
            while answered is None and time.monotonic() - back < 10:
                try:
                    answered = await client.call("memory/recall", QUERY)
                except A2MRemoteError as exc:
                    refusals.add(exc.data["reason"])
                    await asyncio.sleep(0.05)
            print(f"used again after {time.monotonic() - back:.2f} s")
            assert refusals <= {"circuit_open"}
            assert answered is not None, "still refused after 10 s"
            assert answered["records"]
            assert state(guard) is BreakerState.CLOSED
        finally:
            await gateway.close()
