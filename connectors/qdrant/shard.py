"""Qdrant's engine in this process: where a store's shard lives, and how one is written.

A ``connection.path`` store's collection is the qdrant-edge shard in the directory
``<path>/<index>`` (one directory per shard, so one path holds several collections).
``connection.location: ":memory:"`` gives a store a private shard in a temporary
directory, on a memory-backed filesystem (``/dev/shm``) where there is one, removed
when the store closes: each process holds its own, so any number serve at once.

The writer (:func:`create_shard`, :func:`write_points`) is what the embedded demo and
the test corpora index with; the gateway itself only reads. qdrant-edge holds the
GIL for a whole call: points are written in small batches.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import qdrant_edge as qe

from connectors.base import Metric, SparseVector
from connectors.errors import EngineConfigError, LocalStorageLocked
from connectors.qdrant.edge_models import vector

CONFIG_FILE: Final = "edge_config.json"
"""What qdrant-edge writes when it creates a shard: the mark of a shard directory."""

_LOCAL_MODE_MARKS: Final = ("meta.json", "collection")
"""What qdrant-client's local mode writes at the root of its path."""


def locked(where: str) -> LocalStorageLocked:
    """The error for a shard under ``where`` (a store's ``connection.path``) that another
    process holds."""
    return LocalStorageLocked(where, "qdrant storage", "a shard opens in one process at a time")


_DISTANCE: Final[dict[str, qe.Distance]] = {
    "cosine": qe.Distance.Cosine,
    "dot": qe.Distance.Dot,
    "l2": qe.Distance.Euclid,
}

_INDEX: Final[dict[str, qe.PayloadSchemaType]] = {
    "keyword": qe.PayloadSchemaType.Keyword,
    "integer": qe.PayloadSchemaType.Integer,
    "float": qe.PayloadSchemaType.Float,
    "datetime": qe.PayloadSchemaType.Datetime,
    "text": qe.PayloadSchemaType.Text,
    "bool": qe.PayloadSchemaType.Bool,
}

BATCH: Final = 256
"""Points per write call (each call holds the GIL for its whole length)."""


def shard_dir(path: str, index: str) -> str:
    """The shard directory of collection ``index`` under a store's ``connection.path``."""
    return os.path.join(path, index)


def refuse_local_mode(path: str) -> None:
    """Refuse a directory written by qdrant-client's local mode (it is not an edge shard).

    Raises:
        EngineConfigError: ``path`` holds local mode's files.
    """
    if any(os.path.exists(os.path.join(path, mark)) for mark in _LOCAL_MODE_MARKS):
        raise EngineConfigError(
            "connection.path holds a collection written by qdrant-client's local mode, which "
            "the gateway no longer reads (it runs Qdrant's own engine, qdrant-edge): rebuild "
            "the store by indexing its documents again into an empty directory "
            "(docs/configuration.md, Qdrant on this machine)"
        )


_MEMORY_PREFIX: Final = "a2m-qdrant-"


def memory_root() -> str:
    """A new private temporary directory, on /dev/shm where it is a writable directory.

    Its name carries this process's id: the directories of processes that ended without
    closing their store (killed) are removed first, so a memory-backed filesystem does
    not fill up with them.
    """
    shm = "/dev/shm"  # noqa: S108 - a private mkdtemp directory under it, mode 0700
    root = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()
    _remove_orphans(root)
    return tempfile.mkdtemp(prefix=f"{_MEMORY_PREFIX}{os.getpid()}-", dir=root)


def _remove_orphans(root: str) -> None:
    """Remove this user's temporary shard directories whose process no longer runs."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(_MEMORY_PREFIX):
            continue
        pid_text = entry.name.removeprefix(_MEMORY_PREFIX).split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            remove_tree(entry.path)  # its process is gone
        except OSError:
            continue  # running (another user's, or unknown): left alone


def remove_tree(path: str) -> None:
    """Remove a temporary shard's directory; a failure leaves it for the OS to clean."""
    shutil.rmtree(path, ignore_errors=True)


def is_shard(path: str) -> bool:
    """Whether ``path`` holds a qdrant-edge shard."""
    return os.path.isfile(os.path.join(path, CONFIG_FILE))


@dataclass(frozen=True, slots=True)
class ShardPoint:
    """One point to write: its id, vectors by name ("" for the unnamed default), payload."""

    id: int | str
    vectors: Mapping[str, Sequence[float] | SparseVector]
    payload: dict[str, Any]


def create_shard(
    path: str,
    *,
    dense: Mapping[str, tuple[int, Metric]] | None = None,
    sparse_idf: Sequence[str] = (),
    indexes: Mapping[str, str] | None = None,
    replace: bool = True,
    cold_vectors: bool = False,
) -> qe.EdgeShard:
    """A new, empty shard at ``path`` (an existing one removed first when ``replace``).

    dense: vector name ("" for the unnamed default) -> (size, metric); sparse_idf: sparse
    vectors, each with Qdrant's IDF modifier; indexes: payload field -> index kind
    (keyword, integer, float, datetime, text, bool); cold_vectors: the dense vectors are
    read from their memory-mapped file as needed instead of loaded into memory at open
    (``Memory.Cold``; kept in the shard). Loaded, a shard's dense vectors take at least
    one 32 MiB chunk of memory however few they are, and a shard on a memory-backed
    filesystem takes that chunk twice (its file and the process's copy): a small shard, or
    one on /dev/shm, is better cold.

    Raises:
        Exception: qdrant-edge's own (the directory is not writable, holds a locked shard).
    """
    if replace and os.path.isdir(path):
        shutil.rmtree(path)
    memory = qe.Memory.Cold if cold_vectors else qe.Memory.Cached  # Cached: the default
    vectors = {
        n: qe.EdgeVectorParams(size=s, distance=_DISTANCE[m], memory=memory)
        for n, (s, m) in (dense or {}).items()
    }
    config = qe.EdgeConfig(
        # One search thread (the default is one per CPU): searches of a gateway's size
        # gain nothing from more, and the event loop keeps the other cores.
        max_search_threads=1,
        vectors=vectors or None,
        sparse_vectors={n: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf) for n in sparse_idf}
        or None,
    )
    shard = qe.EdgeShard.create(path, config)
    for field, kind in (indexes or {}).items():
        shard.update(qe.UpdateOperation.create_field_index(field, _INDEX[kind]))
    return shard


def write_points(shard: qe.EdgeShard, points: Iterable[ShardPoint], batch: int = BATCH) -> int:
    """Upsert the points in batches and flush; the number written."""
    written = 0
    for chunk in _batches(points, batch):
        shard.update(
            qe.UpdateOperation.upsert_points(
                [
                    qe.Point(
                        id=p.id,
                        vector={n: _point_vector(v) for n, v in p.vectors.items()},
                        payload=p.payload,
                    )
                    for p in chunk
                ]
            )
        )
        written += len(chunk)
    shard.flush()
    return written


def _point_vector(v: Sequence[float] | SparseVector) -> Any:
    if isinstance(v, SparseVector):
        return vector(v)
    return [float(x) for x in v]


def _batches(points: Iterable[ShardPoint], size: int) -> Iterator[list[ShardPoint]]:
    chunk: list[ShardPoint] = []
    for p in points:
        chunk.append(p)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


__all__ = ["Path", "ShardPoint", "create_shard", "is_shard", "shard_dir", "write_points"]
