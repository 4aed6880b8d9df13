"""stdio opens only the store it serves: another store's trouble is not its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.runtime import Gateway, StoreStartFailed


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


def two_stores(tmp_path: Path, dead_url: str) -> Path:
    """A config: store `a` on qdrant-edge (reachable), store `b` at `dead_url`."""
    import yaml

    from tests.security.support import write_qdrant

    write_qdrant(tmp_path / "a", "served", [(1, {"content": "harbour cranes at dawn"})], "content")
    dead = {
        "backend": "opensearch",
        "index": "elsewhere",
        "connection": {"hosts": [dead_url], "retries": 0, "timeout_ms": 2000},
        "mapping": {"content": "content"},
        "search": {"text_fields": ["content"]},
    }
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(yaml.safe_dump({"stores": {"a": _local(tmp_path / "a", "served"), "b": dead}}))
    return cfg


@pytest.mark.parametrize("store", ["a", None])
def test_a2m_stdio_never_connects_to_another_store(tmp_path: Path, store: str | None) -> None:
    import subprocess

    import orjson

    from tests.conformance.conftest import gateway_command, gateway_env
    from tests.support.listener import recording_listener

    with recording_listener() as dead:
        cfg = two_stores(tmp_path, dead.url)
        line = {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": {"query": "cranes"}}
        args = ["--store", store] if store else []  # None: the default store, the first
        done = subprocess.run(
            [*gateway_command(), "stdio", "--config", str(cfg), *args],
            input=orjson.dumps(line) + b"\n",
            capture_output=True,
            env=gateway_env(tmp_path / "data"),
            timeout=120,
            check=True,
        )
        records = orjson.loads(done.stdout.splitlines()[0])["result"]["records"]
        assert [r["content"] for r in records] == ["harbour cranes at dawn"]
        assert dead.connections == []
