"""What the rate limit adds to one call: the in-process buckets and the shared ones in Redis,
side by side, in one run.

    python -m bench.ratelimit_cost [--calls 5000] [--rounds 3] [--write-docs]

A private redis-server starts on loopback (tests/support/redis_server.py). Each round
charges ``--calls`` calls, one at a time, under uvloop (as ``serve`` runs), to each way in
turn: ``none`` (an awaited coroutine: the floor), ``memory`` (``rate_limit.backend:
memory``), ``loopback PING`` (a bare asyncio stream's round trip to the same server: the
socket's share) and ``redis`` (``backend: redis``, the real client, script and deadline), over
100 principals with a quota no call exhausts. Per way: the gateway's CPU per call (process
time), redis-server's CPU per call, and the p50/p99 of one charge; "added" is against the
floor. Figures are medians over the rounds; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bench.docs import BENCHMARKS_MD, replace_section
from bench.machine import cpu_seconds, load_text
from gateway.config import RateLimitConfig
from gateway.security.ratelimit import make_quota
from tests.support.redis_server import RedisServer

Charge = Callable[[str], Awaitable[int | None]]
PRINCIPALS = [f"sub:principal-{i}" for i in range(100)]


@dataclass
class Figures:
    cpu_us: float
    redis_cpu_us: float
    p50_us: float
    p99_us: float


async def _floor(key: str) -> int | None:
    return None


async def _one_way(charge: Charge, calls: int, redis_pid: int | None) -> Figures:
    for key in PRINCIPALS:  # connected, script loaded, every bucket exists
        await charge(key)
    took: list[float] = []
    redis_before = cpu_seconds(redis_pid) if redis_pid else None
    cpu_before = time.process_time()
    for i in range(calls):
        key = PRINCIPALS[i % len(PRINCIPALS)]
        start = time.perf_counter()
        await charge(key)
        took.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu_before
    redis_after = cpu_seconds(redis_pid) if redis_pid else None
    redis_cpu = (redis_after - redis_before) if redis_before is not None and redis_after else 0.0
    took.sort()
    return Figures(
        cpu / calls * 1e6,
        redis_cpu / calls * 1e6,
        took[len(took) // 2] * 1e6,
        took[int(len(took) * 0.99)] * 1e6,
    )


async def measure(redis: RedisServer, calls: int, rounds: int) -> dict[str, list[Figures]]:
    quota = {"requests_per_second": 1e6, "burst": 1_000_000}
    memory = make_quota(RateLimitConfig.model_validate(quota))
    shared = make_quota(
        RateLimitConfig.model_validate(
            {**quota, "backend": "redis", "redis": {"url": redis.url, "timeout_ms": 1000}}
        )
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", redis.port)

    async def loopback(key: str) -> int | None:
        writer.write(b"*1\r\n$4\r\nPING\r\n")
        await reader.readline()
        return None

    ways: dict[str, tuple[Charge, int | None]] = {
        "none": (_floor, None),
        "memory": (memory.acquire, None),
        "loopback PING": (loopback, redis.pid),
        "redis": (shared.acquire, redis.pid),
    }
    out: dict[str, list[Figures]] = {name: [] for name in ways}
    try:
        for _ in range(rounds):
            for name, (charge, pid) in ways.items():
                out[name].append(await _one_way(charge, calls, pid))
    finally:
        writer.close()
        await shared.close()
    health = shared.health
    if health is not None and health.errors:
        raise RuntimeError(f"Redis calls failed during the run: {health.errors}")
    return out


def _median(rows: list[Figures], field: str) -> float:
    return float(statistics.median(float(getattr(r, field)) for r in rows))


def table(results: dict[str, list[Figures]], calls: int, rounds: int, load: str) -> str:
    floor = results["none"]
    lines = [
        f"{rounds} rounds of {calls:,} charges each, one at a time; medians over the rounds; "
        f"load average before / after: {load}",
        "",
        "| way | gateway CPU us/call | added CPU us/call | redis-server CPU us/call "
        "| p50 us | added p50 us | p99 us |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, rows in results.items():
        cpu, p50 = _median(rows, "cpu_us"), _median(rows, "p50_us")
        lines.append(
            f"| {name} | {cpu:.1f} | {cpu - _median(floor, 'cpu_us'):.1f} "
            f"| {_median(rows, 'redis_cpu_us'):.1f} | {p50:.1f} "
            f"| {p50 - _median(floor, 'p50_us'):.1f} | {_median(rows, 'p99_us'):.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    import uvloop

    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp))
        redis.start()
        try:
            before = load_text()
            results = uvloop.run(measure(redis, args.calls, args.rounds))
            load = f"{before} / {load_text()}"
        finally:
            redis.stop()
    text = table(results, args.calls, args.rounds, load)
    print(text)
    if args.write_docs:
        replace_section(BENCHMARKS_MD, "ratelimit", text)


if __name__ == "__main__":
    main()
