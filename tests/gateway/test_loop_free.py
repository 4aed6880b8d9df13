"""CPU-heavy steps of a recall leave the event loop: proven by ordering, not time.

Each heavy step (encoding a 4,000-character query, mapping a large page, shaping a
large result) is made to wait, in whatever thread it runs, until a probe task on
the event loop has run. Run on the loop, the step would wait for a task the
blocked loop cannot schedule: the wait gives up and the test fails. Run off the
loop, the probe runs first. Against a real Qdrant store in process (qdrant-edge).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from connectors.qdrant.connector import ENCODE_INLINE_CHARS
from gateway.a2m.params import RecallParams
from gateway.config import parse_config
from gateway.store.connector_spec import connector_spec
from gateway.store.paging import INLINE_RECORDS
from gateway.store.store import Store
from tests.security.support import SPARSE, write_qdrant

pytestmark = pytest.mark.integration

DOCS = 3 * INLINE_RECORDS
WAIT_S = 30.0
"""How long a step waits for the probe: only reached when the loop is blocked."""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    from connectors.factory import make_connector

    docs = [(i + 1, {"content": f"harbour crane note {i}"}) for i in range(DOCS)]
    write_qdrant(tmp_path / "q", "loopfree", docs, "content")
    raw = {
        "backend": "qdrant",
        "index": "loopfree",
        "connection": {"path": str(tmp_path / "q")},
        "mapping": {"content": "content"},
        "search": {"mode": "lexical", "sparse_vector": SPARSE},
        "limits": {"max_recall_limit": DOCS},
    }
    config = parse_config({"stores": {"s": raw}}).stores["s"]
    s = Store("s", config, make_connector(connector_spec(config)))
    await s.start()
    try:
        yield s
    finally:
        await s.close()


class WaitsForTheLoop:
    """A step that records its thread and runs only once the loop's probe has run."""

    def __init__(self, step: Callable[..., Any], probe_ran: threading.Event) -> None:
        self._step = step
        self._probe_ran = probe_ran
        self.threads: list[int] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        assert self._probe_ran.wait(WAIT_S), "the event loop was blocked while this step ran"
        return self._step(*args, **kwargs)


async def recall_with_probe(store: Store, params: RecallParams, probe_ran: threading.Event) -> Any:
    recall = asyncio.create_task(store.recall(params))
    await asyncio.sleep(0)  # the recall starts first, then the probe is scheduled
    probe = asyncio.get_running_loop().call_soon(probe_ran.set)
    result = await recall
    assert not probe.cancelled()
    return result


async def test_a_long_query_is_encoded_while_the_loop_runs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = store.connector._encoder  # type: ignore[attr-defined]
    probe_ran = threading.Event()
    encode = WaitsForTheLoop(encoder.encode_query, probe_ran)
    monkeypatch.setattr(encoder, "encode_query", encode)
    query = ("harbour crane " * 400)[:4000]
    assert len(query) > ENCODE_INLINE_CHARS
    result = await recall_with_probe(store, RecallParams(query=query, limit=5), probe_ran)
    assert len(result["records"]) == 5
    assert encode.threads
    assert encode.threads[0] != threading.get_ident()


@pytest.mark.parametrize("step", ["records", "result"])
async def test_a_large_page_is_mapped_and_shaped_while_the_loop_runs(
    store: Store, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    probe_ran = threading.Event()
    # Mapping hits to records is the shaper's; the wire form and the prompt the front's.
    owner: Any = store.shaper if step == "records" else store.front
    slow = WaitsForTheLoop(getattr(owner, step), probe_ran)
    monkeypatch.setattr(owner, step, slow)
    params = RecallParams.model_validate(
        {"query": "harbour crane", "limit": DOCS, "prompt": {"budget": 50_000}}
    )
    result = await recall_with_probe(store, params, probe_ran)
    assert len(result["records"]) == DOCS > INLINE_RECORDS
    assert "harbour crane note" in result["prompt"]
    assert slow.threads
    assert slow.threads[0] != threading.get_ident()


async def test_a_small_page_stays_on_the_loop(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: below the threshold the step runs inline (a thread hop costs more)."""
    threads: list[int] = []
    records = store.shaper.records

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return records(*args, **kwargs)

    monkeypatch.setattr(store.shaper, "records", recording)
    result = await store.recall(RecallParams(query="harbour crane", limit=5))
    assert len(result["records"]) == 5
    assert threads == [threading.get_ident()]
