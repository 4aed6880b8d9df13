"""A 3-node OpenSearch cluster loses a node under load: the gateway fails over, no call fails.

The cluster is started here (``engines.py cluster``, 3 JVMs of 512 MiB, own ports and data)
and stopped at the end; the suite's single nodes are not touched. The index has 2 shards
and 1 replica, so every shard keeps a copy when one node dies, and the gateway's store
names all three nodes: a request that lands on the dead node must be retried on another
inside the deadline, /readyz must stay ready and the breaker closed.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.config import GatewayConfig
from gateway.observability.metrics import Metrics
from gateway.runtime import Gateway
from gateway.transports.http import create_app
from tests.conftest import missing
from tests.support import cluster as local
from tests.support import lucene_loader
from tests.support.asgi import app_client
from tests.support.scifact import SciFact

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]

ENGINE = "opensearch3"
INDEX = "a2m-failover-scifact"
WORKERS = 4


@pytest.fixture(scope="module")
def os_cluster(scifact: SciFact) -> Iterator[local.Cluster]:
    try:
        cluster = local.start(ENGINE)
    except RuntimeError as exc:
        local.stop(ENGINE)
        missing(str(exc))
        raise
    try:
        lucene_loader.load_index("opensearch", cluster.urls[0], INDEX, scifact)
        local.replicate(cluster.urls[0], INDEX, 1)
        yield cluster
    finally:
        local.stop(ENGINE)


def store(urls: list[str]) -> dict[str, Any]:
    return {
        "backend": "opensearch",
        "index": INDEX,
        "connection": {"hosts": urls},
        "mapping": {"id": "doc_id", "content": "text", "created_at": "created_at"},
        "search": {
            "mode": "lexical",
            "text_fields": ["title", "text"],
            "vector_field": "embedding",
        },
    }


def call(sf: SciFact, rng: random.Random) -> dict[str, Any]:
    """A lexical recall, a hybrid recall (the query's own vector) or a timeline call."""
    kind = rng.choice(("lexical", "hybrid", "timeline"))
    if kind == "timeline":
        return {"method": "memory/timeline", "params": {"limit": 10}}
    q = rng.choice(sf.query_ids)
    params: dict[str, Any] = {"query": sf.queries[q], "limit": 10}
    if kind == "hybrid":
        params["embedding"] = sf.query_vector(q)
    return {"method": "memory/recall", "params": params}


async def test_a_killed_node_costs_no_call(os_cluster: local.Cluster, scifact: SciFact) -> None:
    config = GatewayConfig.model_validate(
        {"server": {"request_timeout_ms": 10_000}, "stores": {"sf": store(os_cluster.urls)}}
    )
    gateway = Gateway(config)
    app = create_app(gateway, config.server, Metrics())
    await gateway.start(strict=True)
    elected = local.manager(os_cluster.urls[0])
    victim = next(m for m in os_cluster.members if m != elected)
    answers: list[tuple[float, dict[str, Any]]] = []
    ready: list[int] = []
    stop = asyncio.Event()

    async with app_client(app) as client:

        async def worker(n: int) -> None:
            rng = random.Random(n)
            while not stop.is_set():
                body = {"jsonrpc": "2.0", "id": n, **call(scifact, rng)}
                r = await client.post("/a2m/sf", json=body)
                answers.append((time.monotonic(), r.json()))
                # An answer made without I/O (a refusal) returns without suspending: let the
                # clock and the other tasks run.
                await asyncio.sleep(0.01)

        async def readiness() -> None:
            while not stop.is_set():
                r = await client.get("/readyz")
                ready.append(r.status_code)
                assert "breakers" not in r.json(), r.json()
                await asyncio.sleep(0.25)

        tasks = [asyncio.create_task(worker(n)) for n in range(WORKERS)]
        tasks.append(asyncio.create_task(readiness()))
        try:
            await asyncio.sleep(3)
            await asyncio.to_thread(local.fault, "kill", victim)
            killed_at = time.monotonic()
            await asyncio.sleep(15)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
    await gateway.close()

    after = [a for at, a in answers if at > killed_at]
    failed = [a for _, a in answers if "result" not in a]
    assert len(after) > 20, f"only {len(after)} calls after the kill"
    assert failed == [], f"{len(failed)} of {len(answers)} calls failed: {failed[:3]}"
    assert ready, "/readyz was never asked"
    assert set(ready) == {200}, ready
    survivors = [u for m, u in os_cluster.members.items() if m != victim]
    assert local.wait_nodes(survivors[0], 2, timeout_s=5), "the victim is still in the cluster"
