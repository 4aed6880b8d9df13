"""Boot the gateway exactly as the chart runs it, and probe it like Kubernetes would.

The chart's rendered ConfigMap, container command/args and mounts are
replayed on this machine: the config file at the mounted path (re-rooted under
a temporary directory, since /etc is not ours to write), a credential read from
a secret file through `${file:...}`, the writable data dir. Then the probes'
endpoints are called and the chart's own `helm test` script makes its round
trip against the real process.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.helm.test_chart import (
    CONFIG_PATH,
    SECRET_DIR,
    config_of,
    gateway_container,
    helm,  # noqa: F401  (the fixture)
    run_hook_script,
    template,
)

pytestmark = [pytest.mark.helm, pytest.mark.integration]

DATA_DIR = "/var/lib/a2m-gateway"
SECRET_VALUE = "boot-test-secret-3e1b"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reroot(value: Any, root: Path) -> Any:
    """Point the pod's absolute paths into `root`."""
    if isinstance(value, dict):
        return {k: _reroot(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_reroot(v, root) for v in value]
    if isinstance(value, str):
        for prefix in ("/etc/a2m-gateway", DATA_DIR):
            value = value.replace(prefix, f"{root}{prefix}")
    return value


def _wait_ready(base: str, proc: subprocess.Popen[bytes], deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"gateway exited with {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)  # polling a readiness endpoint, bounded by the deadline above
    raise AssertionError("gateway did not become ready in time")


@pytest.fixture(scope="module")
def booted(helm: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:  # noqa: F811
    root = tmp_path_factory.mktemp("pod")
    # The default values serve the packaged demo store; a secret file is mounted as the
    # chart mounts existingSecret, and the config reads it through ${file:...}.
    render = template(
        helm,
        sets=["existingSecret=a2m-secrets"],
        set_strings=[
            "demoStore.description=${file:/etc/a2m-gateway/secrets/description}",
        ],
    )
    container = gateway_container(render)
    config = _reroot(config_of(render), root)
    port = _free_port()

    (root / SECRET_DIR.lstrip("/")).mkdir(parents=True)
    (root / SECRET_DIR.lstrip("/") / "description").write_text(SECRET_VALUE + "\n")
    config_file = root / CONFIG_PATH.lstrip("/")
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(yaml.safe_dump(config))
    (root / DATA_DIR.lstrip("/")).mkdir(parents=True)

    exe = shutil.which(container["command"][0])
    assert exe, "the console script the image runs must be installed"
    args = [str(_reroot(a, root)) for a in container["args"]]
    args[args.index("--port") + 1] = str(port)
    args[args.index("--host") + 1] = "127.0.0.1"
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2M_")}
    env["HOME"] = str(root / "home")
    log = (root / "gateway.log").open("wb")
    proc = subprocess.Popen([exe, *args], stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc)
        yield base, render
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    # SIGTERM is a graceful shutdown (uvicorn re-raises the signal once it is done, so the
    # exit status is the signal's), and the secret never reached the log.
    text = (root / "gateway.log").read_text()
    assert proc.returncode in (0, -signal.SIGTERM), text[-2000:]
    assert "Application shutdown complete" in text
    assert SECRET_VALUE not in text


def test_probe_endpoints(booted: tuple[str, Any]) -> None:
    base, render = booted
    probes = {
        name: gateway_container(render)[name]["httpGet"]["path"]
        for name in ("livenessProbe", "readinessProbe", "startupProbe")
    }
    for path in set(probes.values()):
        assert httpx.get(f"{base}{path}", timeout=5).status_code == 200, path
    ready = httpx.get(f"{base}/readyz", timeout=5).json()
    assert ready == {"status": "ready", "stores": {"demo": True}}


def test_config_and_secret_file_took_effect(booted: tuple[str, Any]) -> None:
    base, _ = booted
    body = {"jsonrpc": "2.0", "id": 1, "method": "memory/describe", "params": {}}
    result = httpx.post(f"{base}/a2m/demo", json=body, timeout=10).json()["result"]
    assert result["description"] == SECRET_VALUE
    assert result["read_only"] is True


def test_metrics_count_calls(booted: tuple[str, Any]) -> None:
    base, _ = booted
    body = {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": {"query": "helm"}}
    assert httpx.post(f"{base}/a2m", json=body, timeout=10).status_code == 200
    text = httpx.get(f"{base}/metrics", timeout=5).text
    assert 'a2m_requests_total{code="0",method="memory/recall",store="demo"}' in text
    assert "a2m_request_duration_seconds_bucket" in text
    assert "a2m_engine_call_duration_seconds_bucket" in text
    assert "a2m_inflight_requests" in text


def test_helm_test_hook_round_trips_against_the_real_gateway(booted: tuple[str, Any]) -> None:
    base, render = booted
    proc = run_hook_script(render, base)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS describe + recall on 1 store(s)" in proc.stdout
