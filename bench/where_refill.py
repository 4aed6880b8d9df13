"""The cost of a `where` the engine only approximates, at each bound on the candidates read.

`where.content` on analysed text (no keyword sub-field) is matched by the engine as a
phrase and checked for equality by the gateway, which asks again for four times as
many while the check drops records, up to the store's ``limits.max_where_candidates``.
A short common value matches most of an index as a phrase and nothing exactly: the
reads then go to the bound. Each store (one per ``--bounds`` value, the same index)
answers the same lexical recall (``limit`` 10) with each ``--where``; the table gives
the searches, the gateway's CPU (this process: ``time.process_time``) and the wall time
a recall, medians over ``--rounds``.

    eval "$(python tests/engines/engines.py env)"
    python -m bench.where_refill --engine elasticsearch --url "$A2M_TEST_ELASTICSEARCH9_URL"
    python -m bench.where_refill --engine opensearch --url "$A2M_TEST_OPENSEARCH3_URL"

The index is the test suite's SciFact index (tests/support/lucene_loader.py, loaded when
absent).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import machine
from bench.quality.collection import SCIFACT
from connectors.registry import make_connector
from gateway.a2m.params import RecallParams
from gateway.config import validate_store
from gateway.store.connector_spec import connector_spec
from gateway.store.store import Store

INDEX = "a2m-test-scifact"
"""The test suite's SciFact index (tests/connectors): loaded once for both."""
QUERY = "vitamin D deficiency and bone fractures"


def store_of(engine: str, url: str, bound: int, searches: list[str]) -> Store:
    """A lexical store on the SciFact index whose refill reads at most ``bound`` hits."""
    config = validate_store(
        {
            "backend": engine,
            "index": INDEX,
            "connection": {"hosts": [url], "timeout_ms": 60_000},
            "mapping": {"id": "doc_id", "content": "text", "key": "key"},
            "search": {"mode": "lexical", "text_fields": ["title", "text"]},
            "limits": {"max_where_candidates": bound},
        }
    )

    def note(store: str, operation: str, seconds: float, error: str | None) -> None:
        searches.append(operation)

    return Store("s", config, make_connector(connector_spec(config)), engine_observers=[note])


async def measure(
    args: argparse.Namespace, wheres: list[dict[str, Any] | None]
) -> list[tuple[int, str, int, float, float, float]]:
    """Per (bound, where): records, searches, CPU ms and wall ms a recall (medians)."""
    rows = []
    for bound in args.bounds:
        searches: list[str] = []
        store = store_of(args.engine, args.url, bound, searches)
        await store.ensure_started()
        try:
            for where in wheres:
                params = RecallParams(query=QUERY, limit=10, where=where)
                await store.recall(params)  # warm
                cpu: list[float] = []
                wall: list[float] = []
                records = 0
                searches.clear()
                for _ in range(args.rounds):
                    c, w = time.process_time(), time.perf_counter()
                    records = len((await store.recall(params))["records"])
                    cpu.append(1000 * (time.process_time() - c))
                    wall.append(1000 * (time.perf_counter() - w))
                label = json.dumps(where) if where else "none"
                rows.append(
                    (
                        bound,
                        label,
                        records,
                        len(searches) / args.rounds,
                        statistics.median(cpu),
                        statistics.median(wall),
                    )
                )
        finally:
            await store.close()
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.where_refill", description=__doc__)
    p.add_argument("--engine", default="elasticsearch", choices=["elasticsearch", "opensearch"])
    p.add_argument("--url", required=True)
    p.add_argument("--bounds", type=int, nargs="+", default=[1000, 10_000])
    p.add_argument("--where", nargs="+", default=["the", "bone"], help="where.content values")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--data", default=str(SCIFACT), help="the SciFact directory")
    args = p.parse_args(argv)
    from tests.support import lucene_loader
    from tests.support.scifact import load_scifact

    lucene_loader.load_index(args.engine, args.url, INDEX, load_scifact(Path(args.data)))
    wheres: list[dict[str, Any] | None] = [None, *({"content": v} for v in args.where)]
    before = machine.load_text()
    rows = asyncio.run(measure(args, wheres))
    print("| bound | where | records | searches | gateway CPU ms | wall ms |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for bound, label, records, searches, cpu, wall in rows:
        print(f"| {bound} | `{label}` | {records} | {searches:.0f} | {cpu:.1f} | {wall:.1f} |")
    print(
        f"{args.engine}, {args.rounds} recalls each (medians); "
        f"{machine.this_machine().describe()}; "
        f"load average {before} before, {machine.load_text()} after."
    )


if __name__ == "__main__":
    main()
