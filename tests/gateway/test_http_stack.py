"""The HTTP app's outermost layer: one error handler, one response count.

Transport behaviour, tested once on an in-memory connector: no engine is involved.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from connectors import retry
from gateway.observability.metrics import Metrics
from gateway.transports.http import create_app
from tests.security.support import (
    MemoryConnector,
    acl_docs,
    build_gateway,
    memory_store_config,
    rpc,
)
from tests.support.asgi import app_client

LOCAL = {"host": "localhost", "content-type": "application/json"}


def _app(metrics: Metrics) -> Any:
    gateway = build_gateway(
        {}, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )
    return create_app(gateway, gateway.config.server, metrics, bind_host="127.0.0.1"), gateway


def _count(metrics: Metrics, status: int) -> float:
    value = metrics.registry.get_sample_value("a2m_http_responses_total", {"status": str(status)})
    return value or 0.0


async def test_every_response_is_counted_by_status() -> None:
    metrics = Metrics()
    app, gateway = _app(metrics)
    async with app_client(app) as c:
        ok = await c.post(
            "/a2m/docs", content=json.dumps(rpc("memory/describe", {})), headers=LOCAL
        )
        missing = await c.post("/a2m/nope", content=b"{}", headers=LOCAL)
        probe = await c.get("/healthz", headers=LOCAL)
    await gateway.close()
    assert (ok.status_code, missing.status_code, probe.status_code) == (200, 404, 200)
    assert _count(metrics, 200) == 2
    assert _count(metrics, 404) == 1


async def test_a_client_gone_mid_body_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    app, gateway = _app(Metrics())
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": b'{"jsonrpc":"2.0",', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/a2m/docs",
        "raw_path": b"/a2m/docs",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8080),
    }
    with caplog.at_level(logging.DEBUG):
        await app(scope, receive, send)
    await gateway.close()
    assert not messages  # the body was read up to the disconnect
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert any("disconnected" in r.getMessage() for r in caplog.records)


async def test_an_escaping_error_is_a_fixed_500_with_the_same_headers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    app, gateway = _app(metrics)

    async def broken() -> dict[str, bool]:
        raise RuntimeError("password hunter2 at 10.0.0.7")

    gateway.ready = broken
    with caplog.at_level(logging.ERROR):
        async with app_client(app, raise_app_exceptions=False) as c:
            r = await c.get("/readyz", headers=LOCAL)
    await gateway.close()
    assert r.status_code == 500
    assert b"hunter2" not in r.content
    assert b"Traceback" not in r.content
    assert r.headers["x-content-type-options"] == "nosniff"
    assert _count(metrics, 500) == 1
    logged = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(logged) == 1  # once, with its traceback, by the outermost handler
    assert logged[0].exc_info is not None


def test_metrics_leave_no_hook_behind() -> None:
    first = Metrics()
    hooks = len(retry._on_retry)
    for _ in range(50):
        Metrics()
    assert len(retry._on_retry) == hooks
    for hook in retry._on_retry:
        hook()
    assert first.registry.get_sample_value("a2m_engine_retries_total") == 1.0


# -- both doors, one admission ---------------------------------------------------------------


def _guarded_app(failures: dict[str, Any] | None = None) -> tuple[Any, Any]:
    from gateway.security.auth import hash_api_key

    auth: dict[str, Any] = {"api_keys": [{"subject": "bob", "hash": hash_api_key(KEY)}]}
    if failures is not None:
        auth["failures"] = failures
    server = {"auth": auth, "max_body_bytes": 4096}
    gateway = build_gateway(
        server, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )
    return create_app(gateway, gateway.config.server, Metrics(), bind_host="127.0.0.1"), gateway


KEY = "k-" + "x" * 40
DOORS = ["/a2m/docs", "/mcp/docs"]


@pytest.mark.parametrize("path", DOORS)
async def test_both_doors_refuse_the_same_way(path: str) -> None:
    """The MCP door takes the A2M door's admission step, refusal for refusal."""
    app, gateway = _guarded_app()
    good = (b"authorization", f"Bearer {KEY}".encode())
    async with app_client(app) as c:
        twice = await c.post(path, content=b"{}", headers=[(b"host", b"localhost"), good, good])
        anonymous = await c.post(path, content=b"{}", headers=LOCAL)
        big = await c.post(
            path,
            content=b"{" + b" " * 5000 + b"}",
            headers={**LOCAL, "authorization": f"Bearer {KEY}", "accept": "application/json"},
        )
    await gateway.close()
    assert twice.status_code == 400
    assert anonymous.status_code == 401
    assert big.status_code == 413


@pytest.mark.parametrize("path", DOORS)
async def test_failed_authentication_is_limited_on_both_doors(path: str) -> None:
    app, gateway = _guarded_app({"per_second": 0.001, "burst": 2})
    async with app_client(app) as c:
        statuses = [
            (
                await c.post(path, content=b"{}", headers={**LOCAL, "authorization": "Bearer no"})
            ).status_code
            for _ in range(4)
        ]
    await gateway.close()
    assert statuses == [401, 401, 429, 429]
