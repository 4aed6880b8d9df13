"""Start and stop the servers a benchmark measures: the gateway and its peer.

One place spawns a server, waits for its health endpoint under a deadline
(never a bare sleep), and stops it. ``A2M_BENCH_GATEWAY_ROOT`` (or ``root=``)
runs the gateway from another checkout of the code (it is put first on the
child's PYTHONPATH), so a benchmark can pin the code it measures while the
working tree changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

READY_TIMEOUT_S = 240.0

__all__ = [
    "GatewayProcess",
    "compile_bytecode",
    "free_port",
    "gateway_command",
    "spawn_until_ready",
    "start_gateway",
    "stop_server",
]


@dataclass
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    base_url: str
    ready_after_s: float
    """From process start until the health endpoint answered 200."""


def gateway_command() -> list[str]:
    beside = Path(sys.executable).with_name("a2m-gateway")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("a2m-gateway")
    return [found] if found else [sys.executable, "-m", "gateway"]


def compile_bytecode(root: str | None = None) -> None:
    """Write the bytecode cache of the gateway's packages, as ``pip install`` and the image
    leave them: start to ready then measures a start, not a compile of every project module
    (about 0.1 s here, paid by every start under ``PYTHONDONTWRITEBYTECODE``)."""
    import compileall

    import connectors
    import gateway

    if root:
        dirs = [Path(root) / name for name in ("gateway", "connectors")]
    else:
        dirs = [Path(m.__file__).parent for m in (gateway, connectors) if m.__file__]
    for directory in dirs:
        compileall.compile_dir(directory, quiet=1)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _log_tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


def spawn_until_ready(
    command: Callable[[int], list[str]],
    env: Mapping[str, str],
    log_path: Path,
    *,
    health_path: str,
    what: str,
    timeout_s: float = READY_TIMEOUT_S,
) -> GatewayProcess:
    """Run ``command(port)`` on a free port and wait until ``health_path`` answers 200.

    Raises:
        RuntimeError: it exited or was not ready in time; the message ends with its log.
    """
    import httpx

    port = free_port()
    with open(log_path, "ab") as log:
        started = time.monotonic()
        proc = subprocess.Popen(
            command(port), stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=dict(env)
        )
    base_url = f"http://127.0.0.1:{port}"
    deadline = started + timeout_s
    with httpx.Client(base_url=base_url, timeout=5.0) as http:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the {what} exited with {proc.returncode}:\n{_log_tail(log_path)}"
                )
            with contextlib.suppress(httpx.TransportError):
                if http.get(health_path).status_code == 200:
                    return GatewayProcess(proc, base_url, time.monotonic() - started)
            if time.monotonic() > deadline:
                stop_server(proc)
                raise RuntimeError(
                    f"the {what} was not ready within {timeout_s}s:\n{_log_tail(log_path)}"
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)  # paced on the process: returns at once if it dies


def start_gateway(
    config: Path | str | None, data_dir: Path, log_path: Path, *, root: str | None = None
) -> GatewayProcess:
    """Start ``a2m-gateway serve`` (the embedded demo when ``config`` is None) on a free
    port and wait for ``/readyz`` (every store open and its engine up).

    Raises:
        RuntimeError: it exited or was not ready in time; the message ends with its log.
    """
    env = {**os.environ, "A2M_DATA_DIR": str(data_dir)}
    root = root or os.environ.get("A2M_BENCH_GATEWAY_ROOT")
    if root:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    compile_bytecode(root)

    def command(port: int) -> list[str]:
        cmd = [*gateway_command(), "serve", "--port", str(port)]
        return [*cmd, "--config", str(config)] if config is not None else cmd

    return spawn_until_ready(command, env, log_path, health_path="/readyz", what="gateway")
