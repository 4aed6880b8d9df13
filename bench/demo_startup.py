"""What the embedded demo costs at start: each process indexes it in memory.

Two figures, each over ``--runs`` starts:

* ``process``: seconds from spawning ``a2m-gateway serve`` (no ``--config``) until
  ``/readyz`` answers 200 (interpreter start, imports, indexing, bind);
* ``open``: seconds for one process to open the demo store (index and open), in memory
  (what the CLI does) and on disk (``default_demo_config(data_dir)``: the first start
  indexes, later ones reuse the collection), the first run of each paying the imports.

    python -m bench.demo_startup [--runs 5] [--root OTHER_CHECKOUT]
    python -m bench.demo_startup --config gateway.yaml [--runs 5]

``--root`` (or ``A2M_BENCH_GATEWAY_ROOT``) runs the ``process`` figure on another checkout,
e.g. one from before the demo moved into memory, for comparison. ``--config`` times the
``process`` figure of that config's ``serve`` instead of the demo's (its stores opened on
their engines before ``/readyz`` answers 200), and skips the ``open`` figures.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench.process import start_gateway, stop_server
from gateway.demo import default_demo_config
from gateway.runtime import Gateway


def process_starts(runs: int, root: str | None, config: Path | None = None) -> list[float]:
    data = Path(tempfile.mkdtemp(prefix="a2m-demo-startup-"))
    out = []
    for _ in range(runs):
        server = start_gateway(config, data, data / "serve.log", root=root)
        out.append(server.ready_after_s)
        stop_server(server.proc)
    return out


async def _open_once(data_dir: Path | None) -> float:
    gateway = Gateway(default_demo_config(data_dir))
    start = time.perf_counter()
    await gateway.open_local_stores()
    elapsed = time.perf_counter() - start
    await gateway.close()
    return elapsed


async def opens(runs: int) -> tuple[list[float], list[float]]:
    memory = [await _open_once(None) for _ in range(runs)]
    data = Path(tempfile.mkdtemp(prefix="a2m-demo-disk-"))
    disk = [await _open_once(data) for _ in range(runs)]
    return memory, disk


def _fmt(values: list[float]) -> str:
    return " ".join(f"{v:.3f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--root", help="checkout to run `serve` from (default: this one)")
    parser.add_argument("--config", type=Path, help="a gateway config to start instead of the demo")
    args = parser.parse_args()
    print(f"process to /readyz, s: {_fmt(process_starts(args.runs, args.root, args.config))}")
    if args.config is not None:
        return
    memory, disk = asyncio.run(opens(args.runs))
    print(f"open in memory, s:    {_fmt(memory)}")
    print(f"open on disk, s:      {_fmt(disk)}  (first indexes, the rest reuse)")


if __name__ == "__main__":
    main()
