"""Real gateway processes: the demo served by several at once, a locked local store refused at
start with its path, and Ctrl-C on `serve` ending quietly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.process import (
    GatewayProcess,
    gateway_command,
    spawn_until_ready,
    start_gateway,
    stop_server,
)

pytestmark = pytest.mark.integration

EXIT_TIMEOUT_S = 60.0


def _rpc(method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def _gateway(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )


@pytest.fixture
def demo_server(tmp_path: Path) -> Iterator[GatewayProcess]:
    server = start_gateway(None, tmp_path / "data", tmp_path / "serve.log")
    try:
        yield server
    finally:
        stop_server(server.proc)


def test_serve_and_stdio_answer_on_the_demo_at_once(demo_server: GatewayProcess) -> None:
    question = {"query": "how are scores normalised?", "limit": 3}
    lines = [_rpc("memory/describe", {}, 1), _rpc("memory/recall", question, 2)]
    # stdio starts, answers and exits on end-of-file while serve keeps running.
    proc = _gateway("stdio", stdin="".join(json.dumps(m) + "\n" for m in lines))
    assert proc.returncode == 0, proc.stderr
    replies = {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert replies[1]["result"]["name"] == "demo"
    stdio_keys = [r["key"] for r in replies[2]["result"]["records"]]
    assert stdio_keys[0] == "demo/recall/scores"

    reply = httpx.post(f"{demo_server.base_url}/a2m", json=_rpc("memory/recall", question, 3))
    assert demo_server.proc.poll() is None
    http_keys = [r["key"] for r in reply.json()["result"]["records"]]
    assert http_keys == stdio_keys


def test_serve_and_stdio_on_config_demo_yaml_at_once(demo_server: GatewayProcess) -> None:
    repo = Path(__file__).resolve().parents[2]
    line = json.dumps(_rpc("memory/describe", {}, 1)) + "\n"
    proc = _gateway("stdio", "--config", str(repo / "config" / "demo.yaml"), stdin=line)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["name"] == "demo"
    assert httpx.get(f"{demo_server.base_url}/readyz").status_code == 200


@pytest.fixture
def locked_store(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A real (non-demo) on-disk store whose shard this test process holds open."""
    storage = tmp_path / "qdrant-store"
    cfg = tmp_path / "local.yaml"
    # A remote store first: the error must name the local store that failed, not the first.
    cfg.write_text(
        "stores:\n  remote:\n    backend: elasticsearch\n    index: r\n"
        "    connection: {hosts: ['http://127.0.0.1:9'], timeout_ms: 500, retries: 0}\n"
        "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
        "  notes:\n    backend: qdrant\n    index: notes\n"
        f"    connection: {{path: '{storage}'}}\n"
        "    mapping: {content: body}\n    search: {mode: lexical, sparse_vector: s}\n"
    )
    from connectors.qdrant.shard import create_shard, shard_dir

    holder = create_shard(shard_dir(str(storage), "notes"), sparse_idf=["s"])
    try:
        yield cfg, storage
    finally:
        holder.close()


@pytest.mark.parametrize("command", ["stdio", "serve", "check"])
def test_a_locked_local_store_is_refused_at_start_with_its_path(
    locked_store: tuple[Path, Path], command: str
) -> None:
    cfg, storage = locked_store
    args = [command, "--config", str(cfg)]
    if command == "serve":
        args += ["--port", "0"]
    if command == "stdio":
        # stdio opens only the store it serves: serve the locked one.
        args += ["--store", "notes"]
    line = json.dumps(_rpc("memory/describe", {}, 1)) + "\n"
    proc = _gateway(*args, stdin=line)
    assert proc.returncode == (1 if command == "check" else 2), proc.stderr
    assert f"store notes: qdrant storage {storage} is locked" in proc.stderr
    assert "another process" in proc.stderr
    assert "store remote" not in proc.stderr or command == "check"
    assert "Traceback" not in proc.stderr
    if command == "stdio":
        assert proc.stdout == ""  # refused before serving: no per-call -32050 retry hint


def test_ctrl_c_on_serve_exits_quietly(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    # A shell's background job inherits SIGINT ignored, and so would the gateway (it then
    # stops on Ctrl-C all the same, exit 0): give it the terminal's default, as Ctrl-C has.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server = start_gateway(None, tmp_path / "data", log)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert httpx.get(f"{server.base_url}/healthz").status_code == 200
        server.proc.send_signal(signal.SIGINT)
        code = server.proc.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        stop_server(server.proc)
    stderr = log.read_text(encoding="utf-8")
    assert code == 128 + signal.SIGINT
    assert "Traceback" not in stderr
    assert "CancelledError" not in stderr
    assert "KeyboardInterrupt" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last == "a2m-gateway: interrupted (Ctrl-C), stopped"


def test_sigterm_on_serve_stays_clean(tmp_path: Path) -> None:
    """SIGTERM (what Kubernetes sends) is re-raised by uvicorn after its graceful shutdown."""
    log = tmp_path / "serve.log"
    server = start_gateway(None, tmp_path / "data", log)
    try:
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        stop_server(server.proc)
    assert code == -signal.SIGTERM, log.read_text(encoding="utf-8")
    assert "Traceback" not in log.read_text(encoding="utf-8")


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[1])


def _worker_pid(base_url: str) -> int:
    # A fresh connection each time, so the kernel may hand it to either worker.
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        text = http.get("/metrics").text
    line = next(ln for ln in text.splitlines() if ln.startswith("a2m_worker_pid "))
    return int(float(line.split()[1]))


def test_serve_workers_2_runs_two_processes_that_answer_and_stop_on_sigterm(
    tmp_path: Path,
) -> None:
    log = tmp_path / "serve.log"
    env = {**os.environ, "A2M_DATA_DIR": str(tmp_path / "data")}
    server = spawn_until_ready(
        lambda port: [*gateway_command(), "serve", "--port", str(port), "--workers", "2"],
        env,
        log,
        health_path="/readyz",
        what="gateway",
    )
    try:
        pids: set[int] = set()
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(_worker_pid(server.base_url))
        assert len(pids) == 2, f"one worker answered every connection: {pids}"
        assert {_ppid(pid) for pid in pids} == {server.proc.pid}
        for rid in range(4):  # recalls on fresh connections, whichever worker takes them
            reply = httpx.post(
                f"{server.base_url}/a2m", json=_rpc("memory/recall", {"query": "scores"}, rid)
            )
            assert reply.json()["result"]["records"], reply.text
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        stop_server(server.proc)
    text = log.read_text(encoding="utf-8")
    assert code == -signal.SIGTERM, text
    assert "Traceback" not in text
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def test_serve_workers_refuses_a_local_store_on_disk(locked_store: tuple[Path, Path]) -> None:
    cfg, _ = locked_store
    proc = _gateway("serve", "--config", str(cfg), "--port", "0", "--workers", "2")
    assert proc.returncode == 2, proc.stderr
    assert "--workers needs stores every process can open; notes use a qdrant shard on disk" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_serve_on_port_0_logs_the_port_it_bound(tmp_path: Path) -> None:
    """`--port 0` is any free port; the start-up line names the real one, which answers."""
    import re

    repo = Path(__file__).resolve().parents[2]
    log = tmp_path / "serve.log"
    cmd = [*gateway_command(), "serve", "--port", "0", "--config", str(repo / "config/demo.yaml")]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        found = None
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(
                r"INFO a2m\.cli listening on http://127\.0\.0\.1:(\d+)", log.read_text()
            )
            time.sleep(0.2)
        assert found is not None, log.read_text()
        port = int(found.group(1))
        assert port != 0
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/healthz").status_code == 200
        listed = httpx.post(
            f"{base}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert listed.status_code == 200, listed.text
    finally:
        stop_server(proc)
    text = log.read_text()
    assert "uvicorn.error" not in text
    assert "Terminating session" not in text
    # The lexical demo says how to make it hybrid, as it works here (tests/gateway/test_minilm.py
    # checks the install hint of an install without the extra).
    assert any("lexical search only" in ln for ln in text.splitlines()), text


def test_serve_on_a_port_in_use_says_so_and_names_port(tmp_path: Path) -> None:
    """A held port fails before any store opens, in one line that names --port."""
    import socket

    repo = Path(__file__).resolve().parents[2]
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        proc = _gateway("serve", "--config", str(repo / "config/demo.yaml"), "--port", str(port))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"a2m-gateway: cannot listen on 127.0.0.1:{port}: address already in use; another "
        "process holds this port: stop it, or pick another with --port (--port 0 takes any "
        "free one)\n"
    )
