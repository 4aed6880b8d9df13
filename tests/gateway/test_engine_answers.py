"""`serve` survives an engine address that answers something else than an engine would.

For Elasticsearch, OpenSearch and a Qdrant server store (REST).

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
from tests.support.http_peer import PeerReply
from tests.support.qdrant_wire import COLLECTION, SPARSE, RestQdrant, Script
from tests.support.scripted_peer import Reply, ScriptedPeer, answer, search_answer

PAGE = b"<!doctype html><html><body><form action=/login>Sign in</form></body></html>"
JSON = [("Content-Type", "application/json"), ("X-Elastic-Product", "Elasticsearch")]
QDRANT_JSON = {"content-type": "application/json"}

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
        store = (
            f"    backend: {backend}\n    index: d\n"
            f"    connection: {{hosts: ['{peer.url}'], timeout_ms: 2000, retries: 0}}\n"
            "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
        )
        text = serve_and_recall(store, tmp_path)
        assert peer.requests  # the engine's address was asked, and answered the form
    assert says in text
    assert "Traceback" not in text
    assert "127.0.0.1" not in text.split(says)[0].rsplit("\n", 1)[-1]  # no host on that line


QDRANT_ANSWERS = {
    "login-page": (
        PeerReply(200, PAGE, {"content-type": "text/html; charset=utf-8"}),
        "answered 200 with text/html, not JSON: is a login page or proxy",
    ),
    "not-json": (PeerReply(200, b"<<not json>>", QDRANT_JSON), "not valid JSON"),
    "still-compressed": (
        PeerReply(200, gzip.compress(b'{"result": null, "status": "ok"}'), QDRANT_JSON),
        "still gzip-compressed",
    ),
    "empty": (PeerReply(200, b"", QDRANT_JSON), "with an empty body"),
    "load-balancer-502": (
        PeerReply(502, b"<html>502 Bad Gateway</html>", {"content-type": "text/html"}),
        "answered 502 with text/html, not the engine's answer: is a proxy or load balancer",
    ),
    "status-never-sent": (
        PeerReply(421, b"Misdirected Request", {"content-type": "text/plain"}),
        "answered 421, which no engine sends to this call",
    ),
}


@pytest.mark.parametrize("form", list(QDRANT_ANSWERS))
def test_serve_keeps_serving_a_qdrant_server_store_and_says_what_came_back(
    form: str, tmp_path: Path
) -> None:
    sent, says = QDRANT_ANSWERS[form]
    script = Script(
        replies=dict.fromkeys(["info", "collection", "query", "scroll", "exists"], sent)
    )
    double = RestQdrant(script)
    try:
        store = (
            f"    backend: qdrant\n    index: {COLLECTION}\n"
            f"    connection: {{url: '{double.url}', timeout_ms: 2000, retries: 0}}\n"
            "    mapping: {content: text}\n"
            f"    search: {{mode: lexical, sparse_vector: {SPARSE}}}\n"
        )
        text = serve_and_recall(store, tmp_path)
    finally:
        double.close()
    assert script.calls  # the server's address was asked, and answered the form
    assert says in text
    assert "Traceback" not in text
    for line in text.splitlines():
        if says in line:
            assert "127.0.0.1" not in line  # no host where the sentence is logged


def serve_and_recall(store: str, tmp_path: Path) -> str:
    """Run ``a2m-gateway serve`` on one store, check it is not ready and that a recall
    answers retryable engine trouble while it keeps serving; its log."""
    cfg = tmp_path / "store.yaml"
    cfg.write_text(f"stores:\n  docs:\n{store}")
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
    return log.read_text(encoding="utf-8", errors="replace")
