"""Client CPU per read of a Qdrant server store over REST, against the scripted REST double.

    python -m bench.qdrant_wire_cost [--calls 2000] [--rounds 4] [--root OTHER_CHECKOUT]

No Qdrant server is needed: the REST double of tests/support/qdrant_wire.py answers in
its own process, so the figure is the connector's own cost per call (request building,
qdrant-client, httpx, the answer check, mapping the points), half lexical searches and
half newest-first timeline reads. Each measurement runs in a fresh process; with
``--root`` the other checkout's code is measured in the same rounds, interleaved (a
before / after in the same minutes). bench.qdrant_cost measures against a real server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.machine import load_text

ROOT = Path(__file__).resolve().parent.parent

_DOUBLE = """
import sys, time
from tests.support.qdrant_wire import RestQdrant, Script
double = RestQdrant(Script())
print(double.url, flush=True)
sys.stdin.read()
double.close()
"""

_MEASURE = """
import asyncio, sys, time, warnings
from connectors.base import OrderedRequest, SearchRequest
from connectors.qdrant.connector import QdrantConnector
from tests.connectors.specs import spec_of

url, calls = sys.argv[1], int(sys.argv[2])

async def main() -> None:
    spec = spec_of({
        "backend": "qdrant", "index": "a2m-wire",
        "connection": {"url": url, "retries": 0},
        "mapping": {"content": "text", "key": "key", "group": "group", "created_at": "created_at"},
        "search": {"mode": "lexical", "sparse_vector": "text-sparse"},
        "request_timeout_ms": 5000,
    })
    c = QdrantConnector(spec)
    await c.open()
    for _ in range(50):
        await c.search(SearchRequest(limit=3, text="harbour tides"))
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(calls):
        if i % 2:
            await c.search(SearchRequest(limit=3, text="harbour tides"))
        else:
            await c.ordered(OrderedRequest(limit=3))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await c.close()
    print(cpu / calls * 1000, wall / calls * 1000)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    asyncio.run(main())
"""


def _measure(root: Path, url: str, calls: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call of ``root``'s connector, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, url, str(calls)],
        env=env,
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--root", type=Path, help="another checkout, measured interleaved")
    args = parser.parse_args()
    roots = {"this checkout": ROOT}
    if args.root is not None:
        roots["--root"] = args.root.resolve()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    double = subprocess.Popen(
        [sys.executable, "-c", _DOUBLE], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert double.stdout is not None
        url = double.stdout.readline().decode().strip()
        print(f"load average {load_text()}; {args.calls} calls per measurement")
        cpu: dict[str, list[float]] = {name: [] for name in roots}
        for r in range(1, args.rounds + 1):
            for name, root in roots.items():
                ms, wall = _measure(root, url, args.calls)
                cpu[name].append(ms)
                print(f"round {r}  {name:14}  CPU {ms:.3f} ms/call  wall {wall:.3f} ms/call")
        for name, values in cpu.items():
            print(f"median  {name:14}  CPU {statistics.median(values):.3f} ms/call")
        print(f"load average {load_text()}")
    finally:
        double.communicate(b"", timeout=30)


if __name__ == "__main__":
    main()
