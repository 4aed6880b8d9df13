"""A private ``redis-server`` for a test: a free loopback port, its own directory, no disk.

The tests start and stop it themselves (a restart keeps the port), so they can
take Redis away mid-load or start it after the gateway. ``redis-server`` comes
from the Debian package that ``scripts/test`` installs where it is missing.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path

from bench.process import free_port

READY_TIMEOUT_S = 20.0


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


class RedisServer:
    """One redis-server process; ``start`` waits until it answers PING (under a deadline)."""

    def __init__(self, directory: Path, *, port: int | None = None, password: str | None = None):
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server not found (apt-get install redis-server)")
        self._binary = binary
        self.directory = directory
        self.port = port or free_port()
        self.password = password
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start it (on the same port after a stop) and wait until it answers.

        Raises:
            RuntimeError: it exited or did not answer within READY_TIMEOUT_S.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            self._binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            # DEBUG SLEEP lets a test make the real server slow.
            "--enable-debug-command",
            "local",
            "--logfile",
            str(self.directory / "redis.log"),
        ]
        if self.password is not None:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._answers():
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer within {READY_TIMEOUT_S}s")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=0.05)  # paced on the process: returns at once if it dies

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                reply = s.recv(64)
        except OSError:
            return False
        # -NOAUTH: up, and asking for the password.
        return reply.startswith((b"+PONG", b"-NOAUTH"))

    def stop(self) -> None:
        """Stop it (SIGTERM; no data is kept, so a restart starts empty)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
