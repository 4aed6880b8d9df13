"""What tracing costs the gateway: CPU per A2M call with tracing off and on, in one process.

The HTTP app is driven in this process through raw ASGI messages (no HTTP
client, no socket), so the process's CPU time is the gateway's own work. The
store's engine is a stub that answers ten fixed hits through one traced client
call, so an engine span is made when tracing is on; a real engine's time is
what ``python -m bench.latency`` measures. Tracing on exports with the real
OTLP/HTTP exporter and batch processor to ``--otlp-endpoint`` (a collector,
or any loopback server answering 200); its thread's CPU is counted too. Rounds
alternate off and on so a shared machine's drift hits both alike.

    python -m bench.tracing_cost --requests 3000 --rounds 5 --otlp-endpoint http://127.0.0.1:4318
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from typing import Any

import orjson

from bench import machine
from bench.inprocess import StubConnector, post
from connectors.base import Hit, SearchRequest
from connectors.tracing import traced_client
from gateway.config import parse_config
from gateway.observability import telemetry
from gateway.observability.metrics import Metrics
from gateway.runtime import Gateway
from gateway.transports.http import create_app

INDEX = "bench-tracing"


class _Engine:
    async def search(self, limit: int) -> list[Hit]:
        return [
            Hit(str(i), {"body": f"record {i} about tracing", "k": f"doc/{i}"}, 1.0 - i / 100)
            for i in range(limit)
        ]


def _gateway() -> Gateway:
    store = {
        "backend": "opensearch",
        "index": INDEX,
        "connection": {"hosts": ["http://127.0.0.1:9"]},  # never contacted: the stub answers
        "mapping": {"content": "body", "key": "k"},
        "search": {"mode": "lexical", "text_fields": ["body"]},
    }
    gateway = Gateway(parse_config({"stores": {"s": store}}))
    engine = _Engine()

    async def search(request: SearchRequest) -> list[Hit]:
        # Through one client call, traced when tracing is on: an engine span per search.
        return await traced_client(engine, "opensearch", INDEX).search(request.limit)

    gateway.stores["s"].connector = StubConnector(search)
    return gateway


async def _call(app: Any, body: bytes) -> int:
    # A caller's sampled trace, a new one per call (traceidratio samples by trace id).
    traceparent = f"00-{random.getrandbits(128):032x}-00f067aa0ba902b7-01"
    status, _ = await post(app, "/a2m/s", body, {"traceparent": traceparent})
    return status


def _tracing_on(endpoint: str, sampler: str) -> None:
    """Tracing as the OTEL_* variables would configure it (the SDK reads os.environ)."""
    os.environ.update(
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_SERVICE_NAME": "bench-tracing",
        }
    )
    name, _, arg = sampler.partition(":")
    os.environ["OTEL_TRACES_SAMPLER"] = name
    os.environ["OTEL_TRACES_SAMPLER_ARG"] = arg or "1.0"
    if not telemetry.configure_from_env():
        raise SystemExit("tracing did not turn on (is the otel extra installed?)")


async def _block(app: Any, n: int) -> float:
    """CPU milliseconds per call over ``n`` calls."""
    body = orjson.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": {"query": "tracing"}}
    )
    start = time.process_time()
    for _ in range(n):
        status = await _call(app, body)
        if status != 200:
            raise SystemExit(f"the gateway answered HTTP {status}")
    return 1000 * (time.process_time() - start) / n


async def main(args: argparse.Namespace) -> None:
    gateway = _gateway()
    app = create_app(gateway, gateway.config.server, Metrics())
    await gateway.start()
    await _block(app, args.warmup)
    # Callers send a sampled traceparent, which parentbased_* would follow: ratio at the root.
    modes = {"off": "", "on": "always_on", "on, 10 % sampled": "traceidratio:0.1"}
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    load_before = machine.load_text()
    for _ in range(args.rounds):
        for mode, sampler in modes.items():
            if sampler:
                _tracing_on(args.otlp_endpoint, sampler)
            cpu[mode].append(await _block(app, args.requests))
            telemetry.shutdown()  # flushes the queue: its export CPU lands in this block
    await gateway.close()
    off = statistics.median(cpu["off"])
    print("| tracing | CPU ms per call (median) | min-max over rounds | vs off |")
    print("| --- | ---: | --- | ---: |")
    for mode, values in cpu.items():
        mid = statistics.median(values)
        print(
            f"| {mode} | {mid:.3f} | {min(values):.3f}-{max(values):.3f} "
            f"| {mid / off:.2f}x (+{mid - off:.3f} ms) |"
        )
    print(
        f"{args.rounds} rounds x {args.requests} calls per mode; "
        f"{machine.this_machine().describe()}; "
        f"load average {load_before} before, {machine.load_text()} after."
    )


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.tracing_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--requests", "-n", type=int, default=3000, help="calls per mode and round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument(
        "--otlp-endpoint",
        default=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
        help="where the traced rounds export (OTLP/HTTP)",
    )
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_parse()))
