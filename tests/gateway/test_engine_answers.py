"""`serve` survives an engine address that answers something else than an engine would.

A sign-on proxy's login page (as a 200 or as its 401), a body that is not JSON, one
still compressed, an empty one: at start the store stays registered and keeps trying,
as for an engine that is down; a recall answers the retryable engine trouble, never the
caller's -32602; the log says in one sentence what came back and holds no traceback.
A scripted server on real sockets stands where the node would be; the gateway is a real
``a2m-gateway serve``.
"""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

import httpx
import pytest

from bench.process import spawn_until_ready, stop_server
from tests.support.scripted_peer import Reply, ScriptedPeer, answer, search_answer

PAGE = b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>"
JSON = [("Content-Type", "application/json"), ("X-Elastic-Product", "Elasticsearch")]

ANSWERS = {
    "login-page": (
        answer(200, PAGE, [("Content-Type", "text/html; charset=utf-8")]),
        "answered 200 with text/html, not JSON: is a login page or proxy",
    ),
    "not-json": (answer(200, b"<<not json>>", JSON), "not valid JSON"),
    "still-compressed": (
        answer(200, gzip.compress(search_answer("x")), JSON),
        "still gzip-compressed",
    ),
    "empty": (answer(200, b"", JSON), "with an empty body"),
    "proxy-sign-in-401": (
        answer(401, PAGE, [("Content-Type", "text/html"), ("WWW-Authenticate", "Basic")]),
        "answered 401 with text/html, not an engine's error: is a login page or proxy",
    ),
}


@pytest.mark.parametrize("form", list(ANSWERS))
@pytest.mark.parametrize("backend", ["elasticsearch", "opensearch"])
def test_serve_keeps_serving_and_says_what_came_back(
    backend: str, form: str, tmp_path: Path
) -> None:
    sent, says = ANSWERS[form]
    with ScriptedPeer(lambda request: Reply([sent])) as peer:
        cfg = tmp_path / "store.yaml"
        cfg.write_text(
            f"stores:\n  docs:\n    backend: {backend}\n    index: d\n"
            f"    connection: {{hosts: ['{peer.url}'], timeout_ms: 2000, retries: 0}}\n"
            "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
        )
        log = tmp_path / "serve.log"

        def command(port: int) -> list[str]:
            serve = [sys.executable, "-m", "gateway", "serve", "--config", str(cfg)]
            return [*serve, "--port", str(port)]

        env = {**os.environ, "A2M_DATA_DIR": str(tmp_path / "data")}
        proc = spawn_until_ready(command, env, log, health_path="/healthz", what="gateway")
        try:
            with httpx.Client(base_url=proc.base_url, timeout=30) as http:
                assert http.get("/readyz").status_code == 503
                call = {"jsonrpc": "2.0", "id": 1, "method": "memory/recall"}
                reply = http.post("/a2m/docs", json={**call, "params": {"query": "vitamin"}})
            error = reply.json()["error"]
            assert error["code"] == -32603, error
            assert error["data"]["reason"] == "engine_unavailable"
            assert error["data"]["retryable"] is True
            assert proc.proc.poll() is None  # still serving
        finally:
            stop_server(proc.proc)
        assert peer.requests  # the engine's address was asked, and answered the form
    text = log.read_text(encoding="utf-8", errors="replace")
    assert says in text
    assert "Traceback" not in text
    assert "127.0.0.1" not in text.split(says)[0].rsplit("\n", 1)[-1]  # no host on that line
