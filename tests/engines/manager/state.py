"""The engines home (A2M_ENGINES_HOME): per-node dirs, logs, state.json and the lock
that serialises the commands across processes."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def home() -> Path:
    env = os.environ.get("A2M_ENGINES_HOME")
    return Path(env) if env else Path.home() / ".cache" / "a2m-engines"


def run_dir(name: str) -> Path:
    """Per-node base dir (config, data, tmp); removed by `stop`."""
    return home() / "run" / name


def log_dir() -> Path:
    return home() / "logs"


def state_path() -> Path:
    return home() / "state.json"


def load_state() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(state_path().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(state: dict[str, dict[str, Any]]) -> None:
    path = state_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)  # atomic: readers never see half a file


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Serialise start/stop/kill/restart across processes (e.g. parallel pytest sessions)."""
    home().mkdir(parents=True, exist_ok=True)
    with open(home() / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])
