"""Real `serve` processes sharing one real redis-server for their rate limit: three replicas
hold one principal to its quota, survive a Redis restart mid-load, start without Redis, and
keep answering other requests while Redis is slow."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest
import redis
import yaml

from bench.process import GatewayProcess, start_gateway, stop_server
from gateway.security.auth import hash_api_key
from gateway.security.ratelimit.shared import BUCKET_SHA
from tests.conftest import missing
from tests.support.redis_server import RedisServer, redis_server_binary

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KEY = "a2m-test-shared-quota-key"
RATE = 5.0
BURST = 5
DESCRIBE = {"jsonrpc": "2.0", "id": 1, "method": "memory/describe", "params": {}}
HEADERS = {"authorization": f"Bearer {KEY}"}


def _config(path: Path, redis_url: str) -> Path:
    """The embedded demo store, one API key, and the quota in Redis."""
    doc = yaml.safe_load((REPO / "config" / "demo.yaml").read_text(encoding="utf-8"))
    doc["server"] = {
        "auth": {"api_keys": [{"subject": "alice", "hash": hash_api_key(KEY)}]},
        "rate_limit": {
            "requests_per_second": RATE,
            "burst": BURST,
            "backend": "redis",
            # Generous on a loaded machine: a late answer here would be decided locally.
            "redis": {"url": redis_url, "timeout_ms": 1000, "retry_after_ms": 500},
        },
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _start(tmp: Path, redis_url: str, n: int) -> list[GatewayProcess]:
    config = _config(tmp / "gateway.yaml", redis_url)
    with ThreadPoolExecutor(n) as pool:
        return list(
            pool.map(
                lambda i: start_gateway(config, tmp / f"data{i}", tmp / f"serve{i}.log"), range(n)
            )
        )


@dataclass
class Cluster:
    redis: RedisServer
    gateways: list[GatewayProcess]
    tmp: Path

    @property
    def urls(self) -> list[str]:
        return [g.base_url for g in self.gateways]


def _redis(directory: Path, port: int | None = None) -> RedisServer:
    if redis_server_binary() is None:
        missing("redis-server not on PATH (scripts/test installs the Debian package)")
    return RedisServer(directory, port=port)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("shared-quota")
    server = _redis(tmp / "redis")
    server.start()
    gateways: list[GatewayProcess] = []
    try:
        gateways = _start(tmp, server.url, 3)
        yield Cluster(server, gateways, tmp)
    finally:
        for g in gateways:
            stop_server(g.proc)
        server.stop()


@dataclass(frozen=True)
class Outcome:
    gateway: int
    sent: float
    done: float
    kind: str
    """ok, quota (-32006), or what else came back."""


def _kind(reply: httpx.Response) -> str:
    if reply.status_code != 200:
        return f"http {reply.status_code}"
    body = reply.json()
    if "result" in body:
        return "ok"
    code = body.get("error", {}).get("code")
    return "quota" if code == -32006 else f"code {code}"


async def _load(urls: list[str], seconds: float, concurrency: int = 12) -> list[Outcome]:
    """Calls from one principal, spread over every gateway, well above its rate."""
    out: list[Outcome] = []
    end = time.monotonic() + seconds

    async def worker(i: int, http: httpx.AsyncClient) -> None:
        gateway = i % len(urls)
        while time.monotonic() < end:
            sent = time.monotonic()
            try:
                reply = await http.post(f"{urls[gateway]}/a2m", json=DESCRIBE, headers=HEADERS)
                kind = _kind(reply)
            except httpx.TransportError as exc:
                kind = type(exc).__name__
            out.append(Outcome(gateway, sent, time.monotonic(), kind))

    async with httpx.AsyncClient(timeout=30) as http:
        await asyncio.gather(*(worker(i, http) for i in range(concurrency)))
    return out


# The gateway's audit line of each charged call: its time is when the bucket decided.
_AUDIT = re.compile(r"^(\S+ \S+) INFO a2m\.audit call .*principal=api_key/alice code=(?:0|-32006)")


def _charged_at(cluster: Cluster, since: float, until: float) -> list[float]:
    """When each gateway charged the principal between two wall-clock times."""
    times = []
    for i in range(len(cluster.gateways)):
        for line in (cluster.tmp / f"serve{i}.log").read_text(encoding="utf-8").splitlines():
            m = _AUDIT.match(line)
            if m is not None:
                at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if since <= at <= until:
                    times.append(at)
    return times


def _measured_load(cluster: Cluster, seconds: float) -> tuple[list[Outcome], float]:
    """The calls of one load, and how long the buckets were charged (first to last charge)."""
    since = time.time() - 0.01
    calls = asyncio.run(_load(cluster.urls, seconds))
    charged = _charged_at(cluster, since, time.time() + 0.01)
    assert len(charged) == len(calls)  # every call charged exactly once
    return calls, max(charged) - min(charged)


def _held_to_quota(calls: list[Outcome], window: float, gateways: int) -> None:
    """Allowed calls within 5 % of burst + rate x the time they were charged over, spread."""
    assert {c.kind for c in calls} <= {"ok", "quota"}, {c.kind for c in calls}
    allowed = [c for c in calls if c.kind == "ok"]
    expected = BURST + RATE * window
    assert abs(len(allowed) - expected) <= 0.05 * expected, (len(allowed), expected)
    # Offered well above the quota, and every replica took its share of the one bucket.
    assert len(calls) > 2 * expected
    assert {c.gateway for c in allowed} == set(range(gateways))


def _metric(base_url: str, name: str) -> float:
    """The sum of a metric's samples on one gateway (0 when it has none)."""
    text = httpx.get(f"{base_url}/metrics").text
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", re.M)
    return sum(float(v) for v in pattern.findall(text))


def test_three_replicas_hold_one_principal_to_its_quota(cluster: Cluster) -> None:
    calls, window = _measured_load(cluster, 6.0)
    _held_to_quota(calls, window, 3)
    for url in cluster.urls:
        assert _metric(url, "a2m_ratelimit_backend_up") == 1
        assert _metric(url, "a2m_ratelimit_backend_errors_total") == 0


def test_a_redis_restart_mid_load_is_survived_and_shared_again(cluster: Cluster) -> None:
    async def restart_during_load() -> list[Outcome]:
        load = asyncio.create_task(_load(cluster.urls, 6.0))
        await asyncio.sleep(1.5)
        await asyncio.to_thread(cluster.redis.stop)
        await asyncio.sleep(1.5)
        await asyncio.to_thread(cluster.redis.start)  # same port, empty: no buckets, no script
        return await load

    calls = asyncio.run(restart_during_load())
    # Every call answered: a result or -32006, never an error or a dropped connection.
    assert {c.kind for c in calls} <= {"ok", "quota"}, {c.kind for c in calls}
    assert sum(_metric(u, "a2m_ratelimit_backend_errors_total") for u in cluster.urls) >= 1
    assert sum(_metric(u, "a2m_ratelimit_backend_fallback_calls_total") for u in cluster.urls) > 0
    for url in cluster.urls:
        assert _metric(url, "a2m_ratelimit_backend_up") == 1
    inspect = redis.Redis(port=cluster.redis.port)
    assert inspect.script_exists(BUCKET_SHA) == [True]  # loaded again after NOSCRIPT
    inspect.close()
    # Shared again: the next load is held to one quota across the three.
    time.sleep(BURST / RATE * 2)  # the bucket full again, as at the first test's start
    errors = [_metric(u, "a2m_ratelimit_backend_errors_total") for u in cluster.urls]
    _held_to_quota(*_measured_load(cluster, 5.0), 3)
    assert [_metric(u, "a2m_ratelimit_backend_errors_total") for u in cluster.urls] == errors


def _debug_sleep(port: int, seconds: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())
        s.recv(64)


def test_a_slow_redis_does_not_stall_the_event_loop(cluster: Cluster) -> None:
    url = cluster.urls[0]
    sleeper = threading.Thread(target=_debug_sleep, args=(cluster.redis.port, 6))
    finished: dict[str, float] = {}

    async def both() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as http:

            async def timed(name: str, call: Awaitable[httpx.Response]) -> httpx.Response:
                reply = await call
                finished[name] = time.monotonic()
                return reply

            rpc = asyncio.ensure_future(
                timed("rpc", http.post(f"{url}/a2m", json=DESCRIBE, headers=HEADERS))
            )
            await asyncio.sleep(0.2)  # the call is waiting on Redis now
            health = await timed("healthz", http.get(f"{url}/healthz"))
            return await rpc, health

    time.sleep(BURST / RATE * 2)
    sleeper.start()
    time.sleep(0.3)  # Redis is asleep
    started = time.monotonic()
    try:
        rpc, health = asyncio.run(both())
    finally:
        sleeper.join()
    assert health.status_code == 200
    # /healthz answered while the A2M call still waited on Redis; that call then ended at
    # its deadline (decided by this replica's own bucket), long before Redis woke.
    assert finished["healthz"] < finished["rpc"]
    assert finished["rpc"] - started < 5.0
    assert _kind(rpc) == "ok"
    assert _metric(url, "a2m_ratelimit_backend_errors_total") >= 1


def test_redis_unreachable_at_start_then_shared_once_it_is_up(tmp_path: Path) -> None:
    server = _redis(tmp_path / "redis")  # a free port, nothing listening yet
    (gateway,) = _start(tmp_path, server.url, 1)  # ready: /readyz does not wait on Redis
    try:
        # This replica's own bucket decides: the burst, then the rate, then -32006.
        calls: list[Outcome] = []
        deadline = time.monotonic() + 60
        while "quota" not in {c.kind for c in calls}:
            assert time.monotonic() < deadline, "no call was ever refused"
            calls += asyncio.run(_load([gateway.base_url], 2.0, concurrency=4))
        assert {c.kind for c in calls} == {"ok", "quota"}
        assert _metric(gateway.base_url, "a2m_ratelimit_backend_up") == 0
        assert _metric(gateway.base_url, "a2m_ratelimit_backend_errors_total") >= 1
        log = (tmp_path / "serve0.log").read_text(encoding="utf-8")
        assert log.count("rate limit: Redis unavailable") == 1  # not one line per call
        assert len(calls) > 10
        server.start()
        deadline = time.monotonic() + 20
        while _metric(gateway.base_url, "a2m_ratelimit_backend_up") != 1:
            assert time.monotonic() < deadline, "the gateway never used Redis once it was up"
            httpx.post(f"{gateway.base_url}/a2m", json=DESCRIBE, headers=HEADERS)
            time.sleep(0.1)
        assert redis.Redis(port=server.port).dbsize() == 1  # alice's bucket, in Redis now
    finally:
        stop_server(gateway.proc)
        server.stop()
