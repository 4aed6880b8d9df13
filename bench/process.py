"""Start and stop the gateway under test as a real ``a2m-gateway serve`` process.

``A2M_BENCH_GATEWAY_ROOT`` (or ``root=``) runs the gateway from another
checkout of the code (it is put first on the child's PYTHONPATH), so a
benchmark can pin the code it measures while the working tree changes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.recall_latency import free_port, gateway_command, stop_server

READY_TIMEOUT_S = 240.0

__all__ = ["GatewayProcess", "start_gateway", "stop_server"]


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    base_url: str
    ready_after_s: float
    """From process start until ``/readyz`` answered 200 (every store open and its engine up)."""


def _log_tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


def start_gateway(
    config: Path, data_dir: Path, log_path: Path, *, root: str | None = None
) -> GatewayProcess:
    """Start ``a2m-gateway serve --config`` on a free port and wait for ``/readyz``.

    Raises:
        RuntimeError: it exited or was not ready in time; the message ends with its log.
    """
    import httpx

    port = free_port()
    env = {**os.environ, "A2M_DATA_DIR": str(data_dir)}
    root = root or os.environ.get("A2M_BENCH_GATEWAY_ROOT")
    if root:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    cmd = [*gateway_command(), "serve", "--config", str(config), "--port", str(port)]
    with open(log_path, "ab") as log:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    base_url = f"http://127.0.0.1:{port}"
    deadline = started + READY_TIMEOUT_S
    with httpx.Client(base_url=base_url, timeout=5.0) as http:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the gateway exited with {proc.returncode}:\n{_log_tail(log_path)}"
                )
            try:
                if http.get("/readyz").status_code == 200:
                    return GatewayProcess(proc, base_url, time.monotonic() - started)
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                stop_server(proc)
                raise RuntimeError(f"not ready within {READY_TIMEOUT_S}s:\n{_log_tail(log_path)}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)  # paced on the process: returns at once if it dies
