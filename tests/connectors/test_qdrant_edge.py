"""Qdrant in this process on qdrant-edge: what only the in-process engine does.

No qdrant-client on this path, a directory of qdrant-client's local mode refused with
how to rebuild it, a shard opened by another process refused as locked, the order of
equal timestamps, the scope filter on every prefetch of both engines' requests, and a
boolean condition matched as a boolean wherever it sits in a filter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from connectors.base import OrderedRequest, SearchRequest
from connectors.errors import EngineConfigError, LocalStorageLocked
from connectors.qdrant.connector import QdrantConnector
from connectors.qdrant.engine import Nearest, Ranked, Rrf
from connectors.qdrant.query import AllOf, AnyOf, Match
from connectors.qdrant.shard import ShardPoint, create_shard, shard_dir, write_points
from tests.connectors.specs import spec_of

pytestmark = pytest.mark.integration


def _spec(path: Path, **mapping: str) -> dict[str, object]:
    return {
        "backend": "qdrant",
        "index": "notes",
        "connection": {"path": str(path), "retries": 0},
        "mapping": {"content": "content", **mapping},
        "search": {"mode": "dense"},
    }


def _write(path: Path, points: list[ShardPoint], **indexes: str) -> None:
    shard = create_shard(shard_dir(str(path), "notes"), dense={"": (2, "cosine")}, indexes=indexes)
    write_points(shard, points)
    shard.close()


def test_the_demo_and_a_path_store_never_import_qdrant_client(tmp_path: Path) -> None:
    """A fresh interpreter serves the demo's recall and a path store's timeline with
    qdrant_client absent from sys.modules (its import alone costs more than the start)."""
    _write(tmp_path, [ShardPoint(1, {"": [1.0, 0.0]}, {"content": "a"})])
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        import gateway.cli, gateway.serve, gateway.transports.http  # what `serve` imports
        from connectors.base import OrderedRequest, SearchRequest
        from connectors.qdrant.connector import QdrantConnector
        from gateway.demo import DEMO_STORE, default_demo_config, ensure_demo_index
        from gateway.store.connector_spec import connector_spec
        from tests.connectors.specs import spec_of

        async def main():
            store = default_demo_config(hybrid=False).stores[DEMO_STORE]
            demo = QdrantConnector(connector_spec(store))
            await ensure_demo_index(store, demo)
            await demo.open()
            hits = await demo.search(SearchRequest(limit=3, text="fetch a record by key"))
            await demo.close()
            path = QdrantConnector(spec_of({json.dumps(_spec(tmp_path))}))
            await path.open()
            rows = await path.ordered(OrderedRequest(limit=1))
            await path.close()
            print(len(hits), len(rows), any(m.startswith("qdrant_client") for m in sys.modules))

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["3", "1", "False"], out.stderr


async def test_a_local_mode_directory_is_refused_with_how_to_rebuild(tmp_path: Path) -> None:
    # What qdrant-client's local mode writes at the root of its path.
    (tmp_path / "meta.json").write_text('{"collections": {"notes": {}}}')
    (tmp_path / "collection" / "notes").mkdir(parents=True)
    c = QdrantConnector(spec_of(_spec(tmp_path)))
    with pytest.raises(EngineConfigError, match="qdrant-client's local mode") as caught:
        await c.open()
    assert "rebuild the store by indexing its documents again" in str(caught.value)
    assert str(tmp_path) not in str(caught.value)  # the wire never shows a path


async def test_a_missing_shard_is_a_missing_collection(tmp_path: Path) -> None:
    c = QdrantConnector(spec_of(_spec(tmp_path)))
    with pytest.raises(EngineConfigError, match="collection named by index does not exist"):
        await c.open()


async def test_a_shard_open_elsewhere_is_refused_as_locked(tmp_path: Path) -> None:
    _write(tmp_path, [ShardPoint(1, {"": [1.0, 0.0]}, {"content": "a"})])
    holder = QdrantConnector(spec_of(_spec(tmp_path)))
    await holder.open()
    try:
        second = QdrantConnector(spec_of(_spec(tmp_path)))
        with pytest.raises(LocalStorageLocked) as caught:
            await second.open()
        assert caught.value.path == str(tmp_path)
    finally:
        await holder.close()
    again = QdrantConnector(spec_of(_spec(tmp_path)))  # released at close: opens at once
    await again.open()
    await again.close()


async def test_equal_timestamps_and_equal_scores_come_in_id_order(tmp_path: Path) -> None:
    same = "2026-01-01T00:00:00Z"
    points = [
        ShardPoint(i, {"": [1.0, 0.0]}, {"content": f"d{i}", "created_at": same})
        for i in (9, 3, 7, 1, 5)
    ]
    _write(tmp_path, points, created_at="datetime")
    c = QdrantConnector(spec_of(_spec(tmp_path, created_at="created_at")))
    await c.open()
    try:
        for _ in range(3):
            rows = await c.ordered(OrderedRequest(limit=5, newest_first=True))
            assert [r.id for r in rows] == ["1", "3", "5", "7", "9"]
            hits = await c.search(SearchRequest(limit=5, dense=[1.0, 0.0]))
            assert [h.id for h in hits] == ["1", "3", "5", "7", "9"]
    finally:
        await c.close()


async def test_a_store_ordered_by_an_unindexed_date_is_refused_at_open(tmp_path: Path) -> None:
    _write(tmp_path, [ShardPoint(1, {"": [1.0, 0.0]}, {"content": "a", "created_at": "2026"})])
    c = QdrantConnector(spec_of(_spec(tmp_path, created_at="created_at")))
    with pytest.raises(EngineConfigError, match="needs a datetime, integer or float payload"):
        await c.open()


_BOOLISH: list[dict[str, object]] = [
    {"b": True},
    {"b": False},
    {"b": 1},
    {"b": 0},
    {"b": [True, False]},
    {"b": "true"},
    {},
]
"""Payloads 1..7: booleans, the integers and the string a boolean must not match, a list
holding both, no field."""


@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "bool-index"])
def test_a_boolean_matches_booleans_only_in_must_should_and_must_not(
    tmp_path: Path, indexed: bool
) -> None:
    """What the connector sends for a boolean condition, on a real shard: the booleans
    (and a list holding one) match; 1, 0 and "true" do not, as on a Qdrant server."""
    import qdrant_edge as qe

    from connectors.qdrant.edge_models import edge_filter

    shard = create_shard(
        str(tmp_path / "s"), dense={"": (2, "cosine")}, indexes={"b": "bool"} if indexed else {}
    )
    write_points(shard, [ShardPoint(i, {"": [1.0, 0.0]}, p) for i, p in enumerate(_BOOLISH, 1)])

    def ids(flt: qe.Filter | None) -> list[int]:
        points, _ = shard.scroll(qe.ScrollRequest(limit=20, filter=flt))
        return sorted(int(p.id) for p in points)

    def must(value: bool) -> qe.Filter:
        flt = edge_filter(AllOf((Match("b", value),)))
        assert flt is not None
        return flt

    try:
        assert ids(must(True)) == [1, 5]
        assert ids(must(False)) == [2, 5]
        either = edge_filter(AllOf((AnyOf((Match("b", True), Match("b", 0))),)))
        assert ids(either) == [1, 4, 5]  # a should: the integer 0 by its own match
        assert ids(qe.Filter(must_not=[must(True)])) == [2, 3, 4, 6, 7]
        dense = qe.Query.Nearest([1.0, 0.0])
        ranked = shard.query(qe.QueryRequest(limit=10, query=dense, filter=must(False)))
        assert sorted(int(p.id) for p in ranked) == [2, 5]
    finally:
        shard.close()


def _resident_mib(path: Path) -> float:
    """This process's resident memory in mappings of files under path (Linux smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if "-" in parts[0] and not parts[0].endswith(":"):
            inside = len(parts) > 5 and parts[5].startswith(str(path))
        elif inside and parts[0] == "Rss:":
            total += int(parts[1])
    return total / 1024


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc smaps")
@pytest.mark.parametrize("where", ["tmp", "shm"])
def test_cold_vectors_take_no_chunk_of_memory(tmp_path: Path, where: str) -> None:
    """An open shard's dense vectors hold a resident 32 MiB chunk (the control); cold ones
    only the pages read, on disk and on /dev/shm."""
    import shutil
    import tempfile

    import qdrant_edge as qe

    if where == "shm" and not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm on this machine")
    root = Path(tempfile.mkdtemp(dir="/dev/shm")) if where == "shm" else tmp_path
    try:
        resident = {}
        for cold in (False, True):
            path = root / f"cold-{cold}"
            shard = create_shard(str(path), dense={"": (384, "cosine")}, cold_vectors=cold)
            points = [ShardPoint(i, {"": [float(i % 7 + 1)] * 384}, {}) for i in range(55)]
            write_points(shard, points)
            shard.close()
            shard = qe.EdgeShard.load(str(path))  # as the connector opens it
            hits = shard.query(qe.QueryRequest(limit=3, query=qe.Query.Nearest([1.0] * 384)))
            assert len(hits) == 3
            resident[cold] = _resident_mib(path)
            shard.close()
        assert resident[False] >= 32
        assert resident[True] < 4
    finally:
        if where == "shm":
            shutil.rmtree(root)


def test_both_engines_put_the_filter_on_every_prefetch() -> None:
    """The scope check reads the engine-neutral request; each engine's builder must carry
    its filter into each fused leg."""
    from connectors.qdrant.edge_models import query_request
    from connectors.qdrant.server_models import query_arguments

    flt = AllOf((Match("acl", "alpha"),))
    ranked = Ranked(
        Rrf(60, None), flt, 10, False, False, (Nearest([1.0], "d", 50), Nearest([0.5], "e", 50))
    )
    edge = query_request(ranked)
    assert len(edge.prefetches) == 2
    assert all('key="acl"' in repr(p.filter) for p in edge.prefetches)
    assert 'key="acl"' in repr(edge.filter)
    server = query_arguments(ranked)
    assert len(server["prefetch"]) == 2
    assert all(p.filter == server["query_filter"] for p in server["prefetch"])
    assert server["query_filter"].must[0].key == "acl"


def test_a_memory_store_removes_the_shards_of_processes_that_ended() -> None:
    """A killed process cannot remove its :memory: shard; the next one to start does."""
    import os

    from connectors.qdrant.shard import memory_root, remove_tree

    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    mine = memory_root()
    root = Path(mine).parent
    orphan = root / f"a2m-qdrant-{int(ended.stdout)}-x"
    orphan.mkdir()
    try:
        second = memory_root()
        assert not orphan.exists()
        assert Path(mine).is_dir()  # this process still runs: its directory stays
        assert Path(second).name.startswith(f"a2m-qdrant-{os.getpid()}-")
        remove_tree(second)
    finally:
        remove_tree(mine)
        remove_tree(str(orphan))
