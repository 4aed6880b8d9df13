"""Where the gateway keeps what it computes once per machine: the demo's chunk vectors and the
MiniLM graph it rewrites to keep int8 weights. ``A2M_CACHE_DIR``, else
``$XDG_CACHE_HOME/a2m-gateway`` (``~/.cache/a2m-gateway``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache directory (not created here)."""
    explicit = os.environ.get("A2M_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "a2m-gateway"


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: a process reading
    it at the same time sees the old file or the whole new one, never part of one.

    Raises:
        OSError: the directory cannot be created or written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
