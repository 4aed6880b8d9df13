"""An engine killed mid-run: the gateway answers a retryable -32603, says not ready, recovers.

Runs last in this package (the name sorts last): it kills the shared node and
waits for it to be back on the same port before it returns, so later tests
find it as they expect.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import GatewayConfig
from gateway.observability.metrics import Metrics
from gateway.runtime import Gateway
from gateway.transports.http import create_app
from tests.connectors.conftest import Loaded, scifact_store_data
from tests.support.asgi import app_client

pytestmark = [pytest.mark.integration]

ENGINES = Path(__file__).resolve().parents[1] / "engines" / "engines.py"


def engines(*args: str) -> None:
    subprocess.run([sys.executable, str(ENGINES), *args], check=True, timeout=300)


def node_at(url: str) -> str:
    """The engines.py node serving ``url``: CI points the suite at 2.19/8.19 or at 3.x/9.x."""
    state = json.loads(
        subprocess.run(
            [sys.executable, str(ENGINES), "state"], check=True, capture_output=True, timeout=30
        ).stdout
    )
    names = [name for name, entry in state.items() if entry.get("url") == url]
    assert names, f"no node started by engines.py serves {url}"
    return str(names[0])


async def until(check: Callable[[], Awaitable[bool]], deadline_s: float) -> bool:
    """Poll `check` until it holds or the deadline passes (the engine restarts in ~10 s)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.25)
    return False


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param("opensearch", marks=pytest.mark.opensearch),
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
    ],
)
async def test_engine_killed_then_restarted(engine: str, request: pytest.FixtureRequest) -> None:
    loaded: Loaded = request.getfixturevalue("os_loaded" if engine == "opensearch" else "es_loaded")
    store = scifact_store_data(
        loaded,
        connection={"hosts": [loaded.url], "timeout_ms": 2000, "retries": 1},
        search={"mode": "lexical", "text_fields": ["title", "text"], "embedder": {"kind": "none"}},
    )
    config = GatewayConfig.model_validate(
        {"server": {"request_timeout_ms": 5000}, "stores": {"sf": store}}
    )
    gateway = Gateway(config)
    app = create_app(gateway, config.server, Metrics())
    await gateway.start(strict=True)
    body = {"jsonrpc": "2.0", "id": 7, "method": "memory/recall", "params": {"query": "cancer"}}

    async with app_client(app) as client:

        async def recall() -> dict[str, Any]:
            r = await client.post("/a2m/sf", json=body)
            assert r.status_code == 200
            out: dict[str, Any] = r.json()
            return out

        async def ready() -> int:
            return (await client.get("/readyz")).status_code

        assert len((await recall())["result"]["records"]) == 10
        assert await ready() == 200
        node = node_at(loaded.url)
        try:
            engines("kill", node)
            down = await recall()
            assert down["id"] == 7
            # docs/protocol.md: engine trouble is a retryable server fault.
            assert down["error"]["code"] == -32603, down
            assert down["error"]["data"]["reason"] == "engine_unavailable"
            assert down["error"]["data"]["retryable"] is True
            assert down["error"]["data"]["retry_after_ms"] > 0
            port = loaded.url.rsplit(":", 1)[1]
            assert port not in str(down)
            assert "127.0.0.1" not in str(down)
            assert await ready() == 503
        finally:
            engines("restart-one", node)

        async def answers() -> bool:
            return "result" in await recall()

        assert await until(answers, 60), "the gateway did not recover after the restart"
        assert len((await recall())["result"]["records"]) == 10
        assert await ready() == 200
    await gateway.close()
