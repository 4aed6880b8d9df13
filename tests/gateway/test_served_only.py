"""stdio opens only the store it serves (issue 13): another store's trouble is not its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway, StoreStartFailed
from gateway.config import parse_config


def _local(path: Path, collection: str) -> dict[str, Any]:
    return {
        "backend": "qdrant",
        "index": collection,
        "connection": {"path": str(path)},
        "mapping": {"content": "content"},
        "search": {"mode": "lexical", "sparse_vector": "text-sparse"},
    }


async def test_only_the_served_store_is_opened(tmp_path: Path) -> None:
    from tests.security.support import write_qdrant

    write_qdrant(tmp_path / "a", "served", [(1, {"content": "hello"})], "content")
    # Store b names a collection that does not exist: opening it fails.
    stores = {"a": _local(tmp_path / "a", "served"), "b": _local(tmp_path / "b", "missing")}
    gateway = Gateway(parse_config({"stores": stores}))
    try:
        await gateway.open_local_stores("a")
        await gateway.start(strict=True, only="a")
        assert gateway.stores["a"].started
        assert not gateway.stores["b"].started
        # Control: opening every store does trip over b.
        with pytest.raises(StoreStartFailed) as failed:
            await gateway.open_local_stores()
        assert failed.value.name == "b"
    finally:
        await gateway.close()
