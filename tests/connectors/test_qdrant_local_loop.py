"""Qdrant in process (qdrant-edge) runs off the event loop: deadlines fire and the loop
keeps answering.

A real in-memory shard of 20,000 points without a date field: a newest-first timeline
scans every point by id, page by page on the worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from connectors.base import OrderedRequest
from connectors.errors import EngineTimeout
from connectors.qdrant.connector import QdrantConnector
from connectors.retry import deadline_scope
from tests.connectors.specs import spec_of

POINTS = 20_000
COLLECTION = "a2m-test-local-loop"


@pytest.fixture
async def large() -> AsyncIterator[QdrantConnector]:
    from connectors.qdrant.shard import ShardPoint, create_shard, write_points

    spec = spec_of(
        {
            "backend": "qdrant",
            "index": COLLECTION,
            "connection": {"location": ":memory:", "retries": 0},
            "mapping": {"content": "content"},
            "search": {"mode": "dense"},
        }
    )
    c = QdrantConnector(spec)
    shard = create_shard(c.local_shard_path(), dense={"": (4, "cosine")})  # private to c
    write_points(
        shard,
        (
            ShardPoint(
                id=i, vectors={"": [1.0, float(i % 7), 0.5, 0.25]}, payload={"content": f"d{i}"}
            )
            for i in range(POINTS)
        ),
    )
    shard.close()
    await c.open()
    try:
        yield c
    finally:
        await c.close()


async def test_the_full_scan_reads_every_point(large: QdrantConnector) -> None:
    # Control: without a deadline the timeline completes and really scanned by id.
    hits = await large.ordered(OrderedRequest(limit=3, newest_first=True))
    assert {h.id for h in hits} == {str(POINTS - 1), str(POINTS - 2), str(POINTS - 3)}


async def test_a_10ms_deadline_fires_on_a_large_local_timeline(large: QdrantConnector) -> None:
    with pytest.raises(EngineTimeout):
        async with deadline_scope(0.01):
            await large.ordered(OrderedRequest(limit=10, newest_first=True))
    # The connector stays usable once the abandoned scan has finished on the worker.
    assert await large.ordered(OrderedRequest(limit=1, newest_first=False))


async def test_the_loop_answers_while_a_local_scan_runs(large: QdrantConnector) -> None:
    scan = asyncio.create_task(large.ordered(OrderedRequest(limit=10, newest_first=True)))
    await asyncio.sleep(0)  # the scan starts and hands its first page to the worker
    ticks = 0
    while not scan.done() and ticks < 3:
        await asyncio.sleep(0)  # a loop-lag probe: runs only if the loop is free
        ticks += 1
    # The health probe answers without queueing behind the scan on the worker.
    healthy = await large.ping()
    answered_during_scan = not scan.done()
    hits = await scan
    assert ticks == 3
    assert healthy is True
    assert answered_during_scan
    assert len(hits) == 10
