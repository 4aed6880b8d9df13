"""Our node processes (alive, gone, terminated) and the free ports they listen on."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

from tests.engines.manager.nodes import HOST, NODES, STOP_GRACE, EngineError, log
from tests.engines.manager.state import home


def pid_alive(pid: int) -> bool:
    """True for a live, non-zombie process that is one of our nodes (guards against pid reuse)."""
    with contextlib.suppress(ChildProcessError):
        # Reap it if it is our own child (when imported in-process), else it stays a zombie.
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True  # no procfs: trust kill(0)
    try:
        stat = (proc / "stat").read_text()
        cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
        return False
    return str(home()) in cmdline


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    return not pid_alive(pid)


def terminate(pid: int, grace: float = STOP_GRACE) -> None:
    """SIGTERM (both engines close the node in a shutdown hook), SIGKILL after the grace."""
    if not pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, grace):
        return
    log(f"pid {pid} still alive {grace:.0f} s after SIGTERM: SIGKILL")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not wait_gone(pid, 10):
        raise EngineError(f"pid {pid} survived SIGKILL")


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same flag the engines' Netty servers use, so a TIME_WAIT leftover does not count as taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def pick_port(name: str) -> int:
    base = NODES[name].base_port
    for port in range(base, base + 100):
        if port_free(port):
            return port
    raise EngineError(f"no free port in {base}..{base + 99} for {name}")
