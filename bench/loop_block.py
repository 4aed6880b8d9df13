"""Does the event loop stay free while the demo serves recall? (not a test)

Starts a real ``a2m-gateway serve`` on the embedded demo (fresh data directory),
then, for ``--seconds``, drives ``memory/recall`` at ``--concurrency`` (every
``--long-every``-th query a 4,000-character one) while a prober in its own
process asks ``GET /healthz`` every 10 ms. /healthz does no work: its latency is
how long a request waits for the loop. Prints /healthz p50/p99 idle and under
load, recall p50/p99, the gateway's CPU seconds per recall (from /proc) and the
load average; ``A2M_BENCH_GATEWAY_ROOT`` measures another checkout (e.g. main).

    python -m bench.loop_block --seconds 30 --concurrency 8
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

import httpx

from bench.machine import cpu_seconds, load_text, this_machine
from bench.process import start_gateway, stop_server
from bench.recall_latency import TOPICS

LONG_QUERY_CHARS = 4_000
PROBE_EVERY_S = 0.010


def long_query(seed: int) -> str:
    words = " ".join(TOPICS[seed % len(TOPICS) :] + TOPICS[: seed % len(TOPICS)])
    return ((words + " ") * (LONG_QUERY_CHARS // len(words) + 1))[:LONG_QUERY_CHARS]


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds per thread of a process, keyed "loop" (the main thread, which runs
    the event loop) and by thread name for the others, summed (Linux /proc)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        key = "loop" if task.name == str(pid) else name.rstrip("0123456789_-")
        out[key] = out.get(key, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile, in milliseconds (values in seconds)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return ordered[rank - 1] * 1000.0


def _get_healthz(sock: socket.socket, request: bytes) -> None:
    """One keep-alive GET /healthz on ``sock``, read to its last byte.

    Raises:
        RuntimeError: not a 200, or the connection closed.
    """
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError("the gateway closed the probe's connection")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"/healthz answered {head[:40]!r}")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError("the gateway closed the probe's connection")
        body += chunk


def _probe(base_url: str, seconds: float, out: Connection) -> None:
    """GET /healthz every PROBE_EVERY_S for `seconds`, in a process of its own.

    A raw keep-alive socket, not an HTTP client library: httpx alone spent about
    1 ms per probe of this process's CPU, which the two cores then lacked and the
    figure included.
    """
    latencies: list[float] = []
    authority = base_url.removeprefix("http://")
    host, port = authority.rsplit(":", 1)
    request = f"GET /healthz HTTP/1.1\r\nhost: {authority}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10.0) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            _get_healthz(sock, request)
            latencies.append(time.perf_counter() - start)
            time.sleep(PROBE_EVERY_S)
    out.send(latencies)
    out.close()


def probe(base_url: str, seconds: float) -> tuple[BaseProcess, Connection]:
    receive, send = mp.Pipe(duplex=False)
    proc = mp.get_context("spawn").Process(target=_probe, args=(base_url, seconds, send))
    proc.start()
    return proc, receive


@dataclass
class Load:
    latencies_s: list[float]
    long_latencies_s: list[float]
    errors: int


async def drive(base_url: str, seconds: float, concurrency: int, long_every: int) -> Load:
    load = Load([], [], 0)
    end = time.monotonic() + seconds
    counter = iter(range(10**9))
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0, limits=limits) as http:

        async def worker() -> None:
            while time.monotonic() < end:
                i = next(counter)
                is_long = long_every > 0 and i % long_every == 0
                query = long_query(i) if is_long else TOPICS[i % len(TOPICS)]
                body = {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "memory/recall",
                    "params": {"query": query, "limit": 10},
                }
                start = time.perf_counter()
                r = await http.post("/a2m", json=body)
                took = time.perf_counter() - start
                if r.status_code != 200 or "result" not in r.json():
                    load.errors += 1
                (load.long_latencies_s if is_long else load.latencies_s).append(took)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return load


@dataclass
class Measured:
    """One run: /healthz idle and under load, the recall load, the gateway's CPU around it."""

    idle: list[float]
    busy: list[float]
    load: Load
    cpu_before: float | None
    cpu_after: float | None
    threads_before: dict[str, float]
    threads_after: dict[str, float]
    load_before: str
    load_after: str


def warm(base_url: str) -> None:
    """The embedder's and the engine's first calls, before anything is timed."""
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        for i in range(20):
            http.post(
                "/a2m",
                json={
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "memory/recall",
                    "params": {"query": TOPICS[i % len(TOPICS)]},
                },
            ).raise_for_status()


def measure(base_url: str, pid: int, args: argparse.Namespace) -> Measured:
    """/healthz probed idle, then beside ``args.seconds`` of recall load."""
    idle_proc, idle_pipe = probe(base_url, min(5.0, args.seconds))
    idle = idle_pipe.recv()
    idle_proc.join()
    load_before = load_text()
    cpu0 = cpu_seconds(pid)
    threads0 = thread_cpu_seconds(pid)
    busy_proc, busy_pipe = probe(base_url, args.seconds)
    load = asyncio.run(drive(base_url, args.seconds, args.concurrency, args.long_every))
    busy = busy_pipe.recv()
    busy_proc.join()
    cpu1 = cpu_seconds(pid)
    threads1 = thread_cpu_seconds(pid)
    return Measured(idle, busy, load, cpu0, cpu1, threads0, threads1, load_before, load_text())


def print_report(args: argparse.Namespace, m: Measured) -> None:
    load = m.load
    calls = len(load.latencies_s) + len(load.long_latencies_s)
    cpu0, cpu1 = m.cpu_before, m.cpu_after
    cpu = (cpu1 - cpu0) / calls * 1000.0 if cpu0 is not None and cpu1 is not None else None
    print(f"machine: {this_machine().describe()}")
    print(f"load average before / after the run: {m.load_before} | {m.load_after}")
    print(
        f"recall at concurrency {args.concurrency} for {args.seconds:.0f} s, "
        f"every {args.long_every}th query {LONG_QUERY_CHARS} characters"
    )
    print("| measure | p50 ms | p99 ms | n |")
    print("|---|---:|---:|---:|")
    rows = [
        ("/healthz, idle", m.idle),
        ("/healthz, under recall load", m.busy),
        ("recall, short query", load.latencies_s),
        ("recall, 4,000-character query", load.long_latencies_s),
    ]
    for name, values in rows:
        p50, p99 = percentile(values, 50), percentile(values, 99)
        print(f"| {name} | {p50:.2f} | {p99:.2f} | {len(values)} |")
    print(f"errors: {load.errors}; gateway CPU per recall: {cpu:.2f} ms" if cpu else "")
    spent = {k: v - m.threads_before.get(k, 0.0) for k, v in m.threads_after.items()}
    per_call = ", ".join(
        f"{k} {v / calls * 1000.0:.2f}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1])
    )
    print(f"CPU ms per recall by thread (loop = the event loop's thread): {per_call}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--long-every", type=int, default=4, help="every n-th query is long (0: none)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="a2m-loop-") as tmp:
        gw = start_gateway(None, Path(tmp) / "data", Path(tmp) / "gateway.log")
        try:
            warm(gw.base_url)
            measured = measure(gw.base_url, gw.proc.pid, args)
        finally:
            stop_server(gw.proc)
    print_report(args, measured)
    return 1 if measured.load.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
