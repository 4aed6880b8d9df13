"""The read plan: the engine request at each page size, the exact `where` check, the refill.

An in-memory connector with fixed answers records what the store asks for; what an
engine does with a request is tested in tests/connectors and tests/conformance.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.base import Hit
from gateway.a2m.params import RecallParams, TimelineParams
from gateway.a2m.records import Record
from gateway.config import ConfigError, parse_config
from gateway.store.paging import MAX_FETCH, refill_sizes
from gateway.store.planner import ExactMatch
from gateway.store.store import Store
from tests.support.memory_connector import MemoryConnector


def paged(count: int) -> MemoryConnector:
    """`count` hits, best first; every other one has lang "en"."""
    return MemoryConnector(
        answers=[
            Hit(str(i), {"body": f"doc {i}", "lang": "en" if i % 2 == 0 else "fr"}, 1 - i / 1000)
            for i in range(count)
        ]
    )


def sizes(conn: MemoryConnector) -> list[int]:
    return [r.limit for r in conn.searches] + [r.limit for r in conn.ordered_reads]


async def store_of(
    connector: MemoryConnector, limits: dict[str, int] | None = None, **search: Any
) -> Store:
    cfg = parse_config(
        {
            "stores": {
                "s": {
                    "backend": "elasticsearch",
                    "index": "i",
                    "connection": {"hosts": ["http://127.0.0.1:1"]},
                    "mapping": {"content": "body", "metadata": ["lang"]},
                    "search": {"text_fields": ["body"], **search},
                    **({"limits": limits} if limits else {}),
                }
            }
        }
    )
    store = Store("s", cfg.stores["s"], connector)
    await store.start()
    return store


def test_refill_sizes_grow_fourfold_up_to_the_engine_window() -> None:
    assert list(refill_sizes(10)) == [10, 40, 160, 640, 2560, MAX_FETCH]
    assert list(refill_sizes(MAX_FETCH)) == [MAX_FETCH]


def test_refill_sizes_stop_at_the_bound_never_below_the_limit() -> None:
    assert list(refill_sizes(10, 1000)) == [10, 40, 160, 640, 1000]
    assert list(refill_sizes(10, 640)) == [10, 40, 160, 640]
    assert list(refill_sizes(200, 50)) == [200], "a limit past the bound is still read"
    assert list(refill_sizes(10, 50_000))[-1] == MAX_FETCH


def test_the_bound_on_candidates_is_at_most_the_engine_window() -> None:
    base: dict[str, Any] = {"backend": "elasticsearch", "index": "i"}
    base["connection"] = {"hosts": ["http://127.0.0.1:1"]}
    base["mapping"], base["search"] = {"content": "body"}, {"text_fields": ["body"]}
    cfg = parse_config({"stores": {"s": base}})
    assert cfg.stores["s"].limits.max_where_candidates == 1000
    for bad in (0, MAX_FETCH + 1):
        with pytest.raises(ConfigError, match="max_where_candidates"):
            parse_config({"stores": {"s": {**base, "limits": {"max_where_candidates": bad}}}})


def test_exact_match_checks_only_string_equalities() -> None:
    assert ExactMatch.of(None) is None
    assert ExactMatch.of({"created_at": "2026-01-01T00:00:00Z"}) is None, "time is exact"
    assert ExactMatch.of({"rank": 3}) is None, "the engine matches numbers exactly"
    exact = ExactMatch.of({"group": "a", "lang": ["en", "de"]})
    assert exact is not None
    assert exact(Record(id="1", group="a", metadata={"lang": ["fr", "en"]}))
    assert not exact(Record(id="2", group="a", metadata={"lang": "fr"}))
    assert not exact(Record(id="3", group="a b", metadata={"lang": "en"}))
    assert not exact(Record(id="4", group="a")), "a missing value meets no equality"


async def test_without_an_exact_check_one_page_of_limit_answers() -> None:
    conn = paged(100)
    store = await store_of(conn)
    out = await store.recall(RecallParams(query="doc", limit=5))
    assert [r["id"] for r in out["records"]] == ["0", "1", "2", "3", "4"]
    assert sizes(conn) == [5]


async def test_a_page_that_loses_records_is_asked_again_four_times_larger() -> None:
    conn = paged(100)
    store = await store_of(conn)
    out = await store.recall(RecallParams(query="doc", limit=15, where={"lang": "en"}))
    assert [r["id"] for r in out["records"]] == [str(i) for i in range(0, 30, 2)]
    assert sizes(conn) == [15, 60], "15 kept 8; 60 kept 30, cut to 15"
    first, second = conn.searches
    assert (first.candidates, second.candidates) == (100, 100)
    assert (first.fusion_depth, second.fusion_depth) == (30, 100), "legs grow with the page"
    assert first.filter == second.filter


async def test_the_refill_stops_when_the_engine_has_no_more() -> None:
    conn = paged(30)
    store = await store_of(conn, candidates=20)
    out = await store.timeline(TimelineParams(limit=20, where={"lang": "en"}))
    assert len(out["records"]) == 15
    assert sizes(conn) == [20, 80], "80 asked, 30 there: nothing more to ask"
    assert all("score" not in r for r in out["records"])
    await store.recall(RecallParams(query="doc", limit=20, where={"lang": "en"}))
    assert [(s.limit, s.candidates, s.fusion_depth) for s in conn.searches] == [
        (20, 20, None),
        (80, 80, None),
    ], "a set candidates is the floor of the kNN breadth and leaves the leg depth unset"


def french_then_english(french: int, total: int) -> MemoryConnector:
    """`total` hits, best first: the first `french` have lang "fr", the rest "en"."""
    return MemoryConnector(
        answers=[
            Hit(str(i), {"body": f"doc {i}", "lang": "fr" if i < french else "en"}, 1 - i / 1e4)
            for i in range(total)
        ]
    )


async def test_the_refill_reads_at_most_the_stores_bound_on_candidates() -> None:
    # Matches past the bound are not read: a `where` the engine approximates loosely
    # costs at most max_where_candidates parsed hits, whatever the index holds.
    conn = french_then_english(700, 5000)
    store = await store_of(conn)
    out = await store.recall(RecallParams(query="doc", limit=10, where={"lang": "en"}))
    assert [r["id"] for r in out["records"]] == [str(i) for i in range(700, 710)]
    assert sizes(conn) == [10, 40, 160, 640, 1000]

    conn = french_then_english(700, 5000)
    store = await store_of(conn, limits={"max_where_candidates": 640})
    out = await store.recall(RecallParams(query="doc", limit=10, where={"lang": "en"}))
    assert out["records"] == [], "the exact matches lie past the 640 candidates read"
    assert sizes(conn) == [10, 40, 160, 640]
    await store.timeline(TimelineParams(limit=10, where={"lang": "en"}))
    assert [r.limit for r in conn.ordered_reads] == [10, 40, 160, 640], "timeline alike"
