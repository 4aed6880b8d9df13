"""A node being started (the process, its logs) and the error that ends a failed start."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.engines.manager.nodes import EngineError
from tests.engines.manager.state import tail


@dataclass
class Launch:
    """A node being started: what `wait_ready` polls."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    out: Path  # stdout/stderr of what we spawned
    logs: list[Path] = field(default_factory=list)  # more files worth a tail on failure
    pidfile: Path | None = None  # Elasticsearch daemonises; its server pid lands here
    pid: int | None = None
    t0: float = field(default_factory=time.monotonic)
    extra: dict[str, Any] = field(default_factory=dict)  # more state to record (Qdrant's)


def open_out(path: Path, fresh: bool) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "wb" if fresh else "ab")  # noqa: SIM115 - handed to the child process
    fh.write(f"\n===== engines.py launch at {time.strftime('%F %T')} =====\n".encode())
    fh.flush()
    return fh


def spawn(
    cmd: list[str], cwd: Path, out: Path, fresh: bool, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a node's process in a session of its own, its output appended to (or, when
    `fresh`, written anew in) `out`; `env` None inherits ours."""
    with open_out(out, fresh) as fh:
        return subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def failure(launch: Launch, why: str) -> EngineError:
    parts = [f"{launch.name} {why}", f"--- tail of {launch.out}", tail(launch.out)]
    for path in launch.logs:
        if path.exists():
            parts += [f"--- tail of {path}", tail(path)]
    return EngineError("\n".join(parts))
