"""Two small qdrant-edge stores, `left` and `right`, for federation tests over stdio.

Each holds three notes about harbour cranes with keys `<name>/<i>` and `created_at`
on 2026-01-01..03, left one minute before right, so a merged timeline interleaves them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.security.support import SPARSE, write_qdrant

NAMES = ("left", "right")


def write_qdrant_pair(root: Path) -> dict[str, dict[str, Any]]:
    """Write both collections under `root`; their store configs, by name."""
    for name, minute in zip(NAMES, (1, 2), strict=True):
        docs = [
            (
                i + 1,
                {
                    "text": f"{name} note {i} about harbour cranes",
                    "key": f"{name}/{i}",
                    "created_at": f"2026-01-0{i + 1}T00:0{minute}:00Z",
                },
            )
            for i in range(3)
        ]
        write_qdrant(root / name, name, docs, "text")
    return {
        name: {
            "backend": "qdrant",
            "index": name,
            "connection": {"path": str(root / name)},
            "mapping": {"content": "text", "key": "key", "created_at": "created_at"},
            "search": {"mode": "lexical", "sparse_vector": SPARSE},
        }
        for name in NAMES
    }
