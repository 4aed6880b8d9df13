"""The gateway's CPU per recall with passages on and off, alternated in one run.

The long-document stores of ``bench.quality --shape`` (bench/quality/long_run.py) answer
the same train queries, one recall at a time (``--concurrency``); each round sends every
query to every store in turn, so a change of the machine's load falls on all of them
alike, and the table gives each store's median over the rounds.

- In this process (the default): the gateway's HTTP app is driven through raw ASGI
  POSTs (bench/inprocess.py: no HTTP client, socket or server), and
  ``time.process_time`` is its own work: the request, the engine calls and their
  answers, the stages, the response. ``--profile DIR`` writes each store's cProfile
  (CPU time) to ``DIR/<store>.prof``.
- ``--server``: a real ``a2m-gateway serve`` process, its CPU read from ``/proc``
  around each block, the HTTP server's work included; ``--root TREE`` starts a second
  one from another source tree (the code before a change), alternated with the first.
- ``--engine-pid ENGINE=PID``: a local engine process's CPU around each block too (its
  idle work included), printed as a second table.
- ``--concurrency N``: N recalls in flight (N clients); one at a time by default.

    eval "$(python tests/engines/engines.py env)"
    python -m bench.passage_cpu --engines elasticsearch opensearch --shape whole nested \\
        --elasticsearch-url "$A2M_TEST_ELASTICSEARCH9_URL" \\
        --opensearch-url "$A2M_TEST_OPENSEARCH3_URL"
    python -m bench.passage_cpu --engines qdrant --shape whole long --server --root ../main
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from bench import machine
from bench.inprocess import post
from bench.process import GatewayProcess, start_gateway, stop_server
from bench.quality.collection import SCIFACT, Split, load_split
from bench.quality.engines import ANALYZERS
from bench.quality.long_docs import build
from bench.quality.long_run import RECALL_LIMIT, load_stores, process_cpu_s
from bench.quality.recall import mode_params
from gateway.config import parse_config
from gateway.observability.metrics import Metrics
from gateway.runtime import Gateway
from gateway.transports.http import create_app

Send = Callable[[str, bytes], Awaitable[tuple[int, bytes]]]
"""One POST of a body to a path: the answer's status and body."""


def bodies(split: Split, mode: str) -> list[bytes]:
    """The ``memory/recall`` request of each query, as a client sends it."""
    out: list[bytes] = []
    for qid in split.query_ids:
        params = mode_params(mode, split.sf.queries[qid], split.sf.query_vector(qid), RECALL_LIMIT)
        out.append(
            orjson.dumps({"jsonrpc": "2.0", "id": qid, "method": "memory/recall", "params": params})
        )
    return out


async def block(send: Send, store: str, requests: Sequence[bytes], concurrency: int = 1) -> None:
    """Every request to ``store``, ``concurrency`` at a time (each of as many clients
    sends its next request when its last is answered).

    Raises:
        SystemExit: a recall failed.
    """
    queue = iter(requests)

    async def client() -> None:
        for body in queue:
            status, answer = await send(f"/a2m/{store}", body)
            if status != 200 or b'"result"' not in answer:
                raise SystemExit(f"{store}: the gateway answered {status} {answer[:200]!r}")

    await asyncio.gather(*(client() for _ in range(concurrency)))


async def in_process(
    args: argparse.Namespace, config: dict[str, Any], requests: Sequence[bytes]
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, cProfile.Profile]]:
    """Per store, CPU ms per recall in each round (this process), the engine's
    (:class:`EngineCpu`), and its profile."""
    gateway = Gateway(parse_config(config))
    app = create_app(gateway, gateway.config.server, Metrics())
    await gateway.start()

    async def send(path: str, body: bytes) -> tuple[int, bytes]:
        return await post(app, path, body)

    names = list(config["stores"])
    profiles = {n: cProfile.Profile(time.process_time) for n in names} if args.profile else {}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    engines = EngineCpu(args.engine_pid, len(requests))
    try:
        for name in names:
            await block(send, name, requests[: args.warm_up], args.concurrency)
        for _ in range(args.rounds):
            for name in names:
                prof = profiles.get(name)
                engines.start(name)
                start = time.process_time()
                if prof is not None:
                    prof.enable()
                await block(send, name, requests, args.concurrency)
                if prof is not None:
                    prof.disable()
                cpu[name].append(1000 * (time.process_time() - start) / len(requests))
                engines.stop(name)
    finally:
        await gateway.close()
    return cpu, engines.cpu, profiles


class EngineCpu:
    """The engine processes' CPU ms per recall in each block (``--engine-pid``), per store
    whose name starts with the engine's: what the engine spent answering the block,
    its idle work included."""

    def __init__(self, pids: Sequence[tuple[str, int]] | None, recalls: int) -> None:
        self._pids = dict(pids or ())
        self._recalls = recalls
        self._start = 0.0
        self.cpu: dict[str, list[float]] = {}

    def _pid(self, store: str) -> int | None:
        return self._pids.get(parts(store)[1])

    def start(self, store: str) -> None:
        pid = self._pid(store)
        if pid is not None:
            self._start = process_cpu_s(pid)

    def stop(self, store: str) -> None:
        pid = self._pid(store)
        if pid is not None:
            used = process_cpu_s(pid) - self._start
            self.cpu.setdefault(store, []).append(1000 * used / self._recalls)


async def served(
    args: argparse.Namespace,
    servers: dict[str, GatewayProcess],
    names: list[str],
    requests: Sequence[bytes],
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per (tree, store), the server's CPU ms per recall in each round, and the engine's
    (:class:`EngineCpu`)."""
    cpu: dict[str, list[float]] = {f"{t} {n}": [] for t in servers for n in names}
    engines = EngineCpu(args.engine_pid, len(requests))
    clients = {t: httpx.AsyncClient(base_url=s.base_url, timeout=60.0) for t, s in servers.items()}
    try:
        sends: dict[str, Send] = {t: _sender(c) for t, c in clients.items()}
        for tree in servers:
            for name in names:
                await block(sends[tree], name, requests[: args.warm_up], args.concurrency)
        for _ in range(args.rounds):
            for tree, server in servers.items():
                for name in names:
                    engines.start(f"{tree} {name}")
                    start = process_cpu_s(server.proc.pid)
                    await block(sends[tree], name, requests, args.concurrency)
                    used = process_cpu_s(server.proc.pid) - start
                    engines.stop(f"{tree} {name}")
                    cpu[f"{tree} {name}"].append(1000 * used / len(requests))
    finally:
        for client in clients.values():
            await client.aclose()
    return cpu, engines.cpu


def _sender(client: httpx.AsyncClient) -> Send:
    async def send(path: str, body: bytes) -> tuple[int, bytes]:
        answer = await client.post(path, content=body, headers={"content-type": "application/json"})
        return answer.status_code, answer.content

    return send


def start_servers(
    args: argparse.Namespace, configs: dict[str, dict[str, Any]], work: Path
) -> dict[str, GatewayProcess]:
    """A gateway per source tree (``this``, and ``before`` with ``--root``), each on its config."""
    servers: dict[str, GatewayProcess] = {}
    roots = {"this": None, **({"before": args.root} if args.root else {})}
    try:
        for tree, root in roots.items():
            path = work / f"gateway-{tree}.yaml"
            path.write_text(yaml.safe_dump(configs[tree], sort_keys=False))
            data, log = work / f"data-{tree}", work / f"gateway-{tree}.log"
            servers[tree] = start_gateway(path, data, log, root=root)
    except BaseException:
        for server in servers.values():
            stop_server(server.proc)
        raise
    return servers


def parts(name: str) -> tuple[str, str, str]:
    """A measured store's (tree, engine, shape) from its name: ``[tree ]engine-shape-stage``
    (no tree in process: "")."""
    tree, _, store = name.rpartition(" ")
    engine, shape = store.split("-")[:2]
    return tree, engine, shape


def report(cpu: dict[str, list[float]], what: str = "CPU ms/recall") -> None:
    """A table of the stores' medians and each one's ratio to its base, the first store of
    its tree, engine and records (``whole`` and ``long`` serve the same records): per
    round (the two blocks ran next to each other, so a change of the machine's load
    between rounds falls on both), the median of those ratios."""
    print(
        f"| store | {what} (median) | min-max over rounds "
        "| vs its base, per round: median (min-max) |"
    )
    print("| --- | ---: | --- | ---: |")
    bases: dict[tuple[str, str, str], list[float]] = {}
    for name, values in cpu.items():
        tree, engine, shape = parts(name)
        records = "long" if shape == "whole" else shape
        base = bases.setdefault((tree, engine, records), values)
        ratios = [v / b for v, b in zip(values, base, strict=True) if b > 0]
        ratio = (
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            if ratios
            else "-"  # a block of a few recalls can read zero /proc ticks
        )
        mid = statistics.median(values)
        print(f"| {name} | {mid:.3f} | {min(values):.3f}-{max(values):.3f} | {ratio} |")


def configs_of(
    args: argparse.Namespace, split: Split, trees: list[str], work: Path
) -> dict[str, dict[str, Any]]:
    """Per source tree, the gateway config serving the shapes' stores (each tree its own
    qdrant-edge shards: local mode allows one client per directory)."""
    shapes = build(split.sf)
    out: dict[str, dict[str, Any]] = {}
    for tree in trees:
        (work / tree).mkdir()
        stores = load_stores(shapes, args.shape, args.engines, args, work / tree)
        names = {key: "-".join(key).replace("=", "").replace(" ", "-") for key in stores}
        wanted = [k for k in stores if not args.stages or k[2] in args.stages]
        out[tree] = {
            "server": {"name": "a2m-bench", "request_timeout_ms": 60_000, "log_level": "warning"},
            "stores": {names[k]: stores[k] for k in wanted},
        }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    split = load_split(Path(args.corpus), Path(args.queries), Path(args.qrels))
    requests = bodies(
        dataclasses.replace(split, query_ids=split.query_ids[: args.limit_queries]), args.mode
    )
    trees = ["this", "before"] if args.server and args.root else ["this"]
    with tempfile.TemporaryDirectory(prefix="a2m-passage-cpu-") as tmp:
        configs = configs_of(args, split, trees, Path(tmp))
        before = machine.load_text()
        if args.server:
            servers = start_servers(args, configs, Path(tmp))
            try:
                names = list(configs["this"]["stores"])
                cpu, engine_cpu = asyncio.run(served(args, servers, names, requests))
            finally:
                for server in servers.values():
                    stop_server(server.proc)
        else:
            cpu, engine_cpu, profiles = asyncio.run(in_process(args, configs["this"], requests))
            for name, prof in profiles.items():
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                prof.dump_stats(str(Path(args.profile) / f"{name}.prof"))
    report(cpu)
    if engine_cpu:
        print()
        report(engine_cpu, "engine CPU ms/recall")
    where = "a gateway process" if args.server else "in process"
    print(
        f"{args.rounds} rounds x {len(requests)} recalls a store ({args.mode}, limit "
        f"{RECALL_LIMIT}, {args.concurrency} at a time, {where}); "
        f"{machine.this_machine().describe()}; "
        f"load average {before} before, {machine.load_text()} after."
    )


def _engine_pid(value: str) -> tuple[str, int]:
    """``ENGINE=PID`` -> (engine, pid).

    Raises:
        argparse.ArgumentTypeError: not an engine name, ``=`` and a number.
    """
    engine, _, pid = value.partition("=")
    if not engine or not pid.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r}: expected ENGINE=PID")
    return engine, int(pid)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.passage_cpu",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--engines",
        nargs="+",
        default=["qdrant"],
        choices=["elasticsearch", "opensearch", "qdrant"],
    )
    p.add_argument(
        "--shape",
        nargs="+",
        default=["whole", "long"],
        choices=["long", "chunked", "whole", "nested"],
    )
    p.add_argument("--stages", nargs="*", help="only these stage settings (e.g. none passages)")
    p.add_argument("--mode", default="hybrid", choices=["bm25", "dense", "hybrid"])
    p.add_argument("--limit-queries", type=int, default=300, help="queries a round (the first N)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warm-up", type=int, default=20, help="unmeasured recalls a store first")
    p.add_argument("--concurrency", type=int, default=1, help="recalls in flight at once (clients)")
    p.add_argument("--profile", help="in process: write each store's cProfile here")
    p.add_argument("--server", action="store_true", help="measure a gateway process")
    p.add_argument("--root", help="with --server: a second gateway from this source tree")
    p.add_argument(
        "--engine-pid",
        action="append",
        type=_engine_pid,
        metavar="ENGINE=PID",
        help="also the CPU of a local engine's process per recall (e.g. elasticsearch=4242)",
    )
    p.add_argument("--corpus", default=str(SCIFACT / "corpus.jsonl"))
    p.add_argument("--queries", default=str(SCIFACT / "queries-train.jsonl"))
    p.add_argument("--qrels", default=str(SCIFACT / "qrels" / "train.tsv"))
    p.add_argument("--elasticsearch-url", default=os.environ.get("A2M_TEST_ELASTICSEARCH_URL"))
    p.add_argument("--opensearch-url", default=os.environ.get("A2M_TEST_OPENSEARCH_URL"))
    p.add_argument("--opensearch-analyzer", default=ANALYZERS["opensearch"])
    args = p.parse_args(argv)
    if args.concurrency < 1:
        p.error("--concurrency: at least 1")
    return args


if __name__ == "__main__":
    main()
