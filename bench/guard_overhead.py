"""CPU a store's guard (circuit breaker + in-flight limit) adds to one engine call.

The "engine" is a coroutine that returns at once, so the figure is the guard's own
cost: process CPU seconds per call, guarded and not, side by side, with the load.

    python -m bench.guard_overhead [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from bench.machine import load_text
from gateway.resilience import EngineGuard, ResilienceConfig


async def _engine() -> int:
    return 1


async def _cpu_per_call(call: Callable[[], Awaitable[int]], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        await call()
    return (time.process_time() - start) / n


async def main(n: int) -> None:
    guard = EngineGuard("bench", ResilienceConfig(), pool_size=32)
    rounds = [
        (await _cpu_per_call(_engine, n), await _cpu_per_call(lambda: guard.call(_engine), n))
        for _ in range(3)
    ]
    print(f"load average {load_text()}; {n} calls per round")
    print("round  direct us/call  guarded us/call  added us/call")
    for i, (direct, guarded) in enumerate(rounds, 1):
        print(
            f"{i:>5}  {direct * 1e6:>14.2f}  {guarded * 1e6:>15.2f}  "
            f"{(guarded - direct) * 1e6:>13.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    asyncio.run(main(parser.parse_args().calls))
