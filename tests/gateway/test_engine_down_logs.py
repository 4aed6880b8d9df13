"""A store whose engine is down: one line of the gateway's own per change, not one per attempt.

The serve test runs a real gateway process against a port nobody listens on; the
guard test drives EngineGuard with calls that fail and then answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from pathlib import Path

import httpx
import pytest

from bench.process import gateway_command, spawn_until_ready, stop_server
from connectors.errors import EngineUnavailable
from gateway.resilience.config import ResilienceConfig
from gateway.resilience.guard import EngineGuard


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


def test_serve_logs_one_line_for_a_down_engine(tmp_path: Path) -> None:
    cfg = tmp_path / "down.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: elasticsearch\n    index: c\n"
        f"    connection: {{hosts: ['http://127.0.0.1:{_closed_port()}'], timeout_ms: 500, "
        "retries: 3}\n    mapping: {content: body}\n    search: {text_fields: [body]}\n"
    )
    log = tmp_path / "serve.log"
    server = spawn_until_ready(
        lambda port: [*gateway_command(), "serve", "--config", str(cfg), "--port", str(port)],
        os.environ,
        log,
        health_path="/healthz",
        what="gateway",
    )
    try:
        for rid in range(3):
            reply = httpx.post(
                f"{server.base_url}/a2m/docs",
                json={"jsonrpc": "2.0", "id": rid, "method": "memory/recall", "params": {}},
                timeout=30,
            )
            assert reply.json()["error"]["data"]["reason"] in ("engine_unavailable", "circuit_open")
    finally:
        stop_server(server.proc)
    text = log.read_text()
    assert "elastic_transport" not in text
    assert "has failed for" not in text
    down = [ln for ln in text.splitlines() if "its engine cannot be reached" in ln]
    assert len(down) == 1, text
    assert "the connection was refused" in down[0]


async def test_the_guard_logs_each_change_once(caplog: pytest.LogCaptureFixture) -> None:
    guard = EngineGuard("docs", ResilienceConfig.model_validate({"breaker": {"enabled": False}}), 4)
    answers: list[str | Exception] = [
        EngineUnavailable(),
        EngineUnavailable(),
        "ok",
        "ok",
        EngineUnavailable(),
    ]

    async def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            try:
                raise answer from ConnectionRefusedError(111, "refused")
            finally:
                del answer
        return answer

    with caplog.at_level(logging.INFO, logger="a2m.engine"):
        for _ in range(5):
            with contextlib.suppress(EngineUnavailable):
                await guard.call(call)
    lines = [r.getMessage() for r in caplog.records if r.name == "a2m.engine"]
    assert lines == [
        "store docs: its engine cannot be reached: the connection was refused (nothing listens "
        "on that host and port); reads answer engine_unavailable until it answers again",
        "store docs: its engine answers again",
        "store docs: its engine cannot be reached: the connection was refused (nothing listens "
        "on that host and port); reads answer engine_unavailable until it answers again",
    ]
