"""The shared rate limit against a real redis-server: the in-process arithmetic, the
script loaded again after a flush, what happens while Redis is away, and its secrets."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import threading
import time

import pytest
import redis

from gateway.config import RateLimitConfig, expand_references
from gateway.security.ratelimit import RateLimiter, make_quota
from gateway.security.ratelimit.health import OnError
from gateway.security.ratelimit.shared import BUCKET_SHA, SharedQuota, connect
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.integration


class SteppedClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _config(url: str, **redis_keys: object) -> RateLimitConfig:
    return RateLimitConfig.model_validate(
        {
            "requests_per_second": 2.0,
            "burst": 3,
            "backend": "redis",
            "redis": {"url": url, "timeout_ms": 2000, **redis_keys},
        }
    )


def _quota(
    url: str,
    rate: float,
    burst: int,
    *,
    on_error: OnError = "local",
    retry_after_ms: int = 1000,
    timeout_ms: int = 2000,
    clock: SteppedClock | None = None,
) -> SharedQuota:
    config = _config(url)
    assert config.redis is not None
    return SharedQuota(
        connect(config.redis),
        rate,
        burst,
        key_prefix="test:",
        timeout_ms=timeout_ms,
        on_error=on_error,
        retry_after_ms=retry_after_ms,
        fallback=RateLimiter(rate, burst),
        clock=clock,
    )


@pytest.mark.parametrize(
    ("rate", "burst"),
    [(2.0, 3), (0.001, 1), (1000.0, 20), (0.3, 7)],
    ids=["slow-small", "nearly-none", "fast-deep", "fractional"],
)
async def test_the_shared_bucket_decides_as_the_in_process_one(
    redis_server: RedisServer, rate: float, burst: int
) -> None:
    clock = SteppedClock()
    local = RateLimiter(rate, burst, clock=clock)
    # Both on one stepped clock (not Redis's): their decisions must agree to the ms.
    shared = _quota(redis_server.url, rate, burst, clock=clock)
    steps = random.Random(f"{rate}/{burst}")
    decisions = []
    try:
        for i in range(900):
            # In units of one token's refill: mostly draining, now and then a long idle
            # (the bucket caps at burst) every 150 calls.
            gap = 60.0 if i % 150 == 149 else steps.choice([0.0] * 5 + [0.001, 0.05, 0.4, 1.7])
            clock.now += gap / rate
            key = steps.choice(["alice", "bob", "carol"])
            decisions.append((local.acquire(key), await shared.acquire(key)))
    finally:
        await shared.close()
    assert [s for _, s in decisions] == [lo for lo, _ in decisions]
    # Not vacuous: both allowed and refused calls (with their waits) were compared.
    assert any(lo is None for lo, _ in decisions)
    assert any(lo is not None for lo, _ in decisions)


async def test_redis_time_drives_the_bucket_and_keys_are_digests(
    redis_server: RedisServer,
) -> None:
    quota = _quota(redis_server.url, 0.5, 3)
    try:
        first = [await quota.acquire("sub:alice") for _ in range(4)]
    finally:
        await quota.close()
    assert first[:3] == [None, None, None]
    assert first[3] is not None
    assert 1 <= first[3] <= 2000
    inspect = redis.Redis(port=redis_server.port, decode_responses=True)
    keys = [str(k) for k in inspect.keys("*")]
    assert keys == [quota.bucket_key("sub:alice")]
    assert "alice" not in keys[0]
    # Expires once it would be full again (6 s at 0.5/s), plus a minute's slack.
    assert 0 < inspect.pttl(keys[0]) <= 6_000 + 60_000
    inspect.close()


async def test_a_flushed_script_cache_is_loaded_again(redis_server: RedisServer) -> None:
    quota = _quota(redis_server.url, 100.0, 5)
    inspect = redis.Redis(port=redis_server.port)
    try:
        assert await quota.acquire("k") is None
        assert inspect.script_exists(BUCKET_SHA) == [True]
        inspect.script_flush()
        assert inspect.script_exists(BUCKET_SHA) == [False]
        assert await quota.acquire("k") is None
        assert inspect.script_exists(BUCKET_SHA) == [True]
        assert quota.health.errors == {}
    finally:
        await quota.close()
        inspect.close()


@pytest.mark.parametrize(
    ("on_error", "allowed"),
    [("local", [True, True, False]), ("open", [True] * 3), ("closed", [False] * 3)],
)
async def test_while_redis_is_away_on_error_decides(
    idle_redis_server: RedisServer, on_error: OnError, allowed: list[bool]
) -> None:
    # Nothing listens on the port: every call is decided without Redis.
    quota = _quota(idle_redis_server.url, 0.01, 2, on_error=on_error, retry_after_ms=250)
    try:
        got = [await quota.acquire("k") for _ in range(3)]
    finally:
        await quota.close()
    assert [g is None for g in got] == allowed
    if on_error == "closed":
        assert got == [250, 250, 250]  # retry once Redis may be asked again
    assert quota.health.down
    assert quota.health.errors.get("connection", 0) >= 1
    assert quota.health.decided_without == {on_error: 3}


async def test_redis_away_then_back_logs_once_and_shares_again(
    idle_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    quota = _quota(idle_redis_server.url, 100.0, 5, retry_after_ms=200)
    caplog.set_level(logging.INFO, logger="gateway.security.ratelimit")
    try:
        for _ in range(200):
            await quota.acquire("k")
        # One probe per retry window, so 200 calls in well under a minute cost few attempts.
        attempts = sum(quota.health.errors.values())
        assert 1 <= attempts < 200
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "Redis unavailable" in warnings[0].getMessage()
        assert str(idle_redis_server.port) not in caplog.text
        idle_redis_server.start()
        deadline = time.monotonic() + 10
        while quota.health.down and time.monotonic() < deadline:
            await quota.acquire("k")
            await asyncio.sleep(0.05)
        assert not quota.health.down
    finally:
        await quota.close()
    assert redis.Redis(port=idle_redis_server.port).exists(quota.bucket_key("k")) == 1
    assert "Redis answers again" in caplog.text


async def test_the_password_comes_from_the_environment_and_is_never_logged(
    idle_redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "s3cret-redis-password-for-the-test"
    idle_redis_server.password = secret
    idle_redis_server.start()
    section = {
        "requests_per_second": 10,
        "backend": "redis",
        "redis": {"url": idle_redis_server.url, "password": "${A2M_TEST_REDIS_PASSWORD}"},
    }
    caplog.set_level(logging.DEBUG)
    # The config load step's own expansion of ${NAME}.
    monkeypatch.setenv("A2M_TEST_REDIS_PASSWORD", secret)
    good = RateLimitConfig.model_validate(expand_references(section))
    monkeypatch.setenv("A2M_TEST_REDIS_PASSWORD", "not-the-password")
    bad = RateLimitConfig.model_validate(expand_references(section))
    assert secret not in repr(good)
    allowed, refused = make_quota(good), make_quota(bad)
    try:
        assert await allowed.acquire("k") is None
        assert await refused.acquire("k") is None  # decided by this replica's own bucket
        assert refused.health is not None
        assert refused.health.errors == {"auth": 1}
    finally:
        await allowed.close()
        await refused.close()
    assert secret not in caplog.text
    assert "not-the-password" not in caplog.text


def _debug_sleep(port: int, seconds: int) -> None:
    """The server itself busy for `seconds` (needs --enable-debug-command)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())
        s.recv(64)


async def test_a_slow_redis_costs_a_call_its_deadline_not_the_event_loop(
    redis_server: RedisServer,
) -> None:
    quota = _quota(redis_server.url, 100.0, 5, timeout_ms=300)
    assert await quota.acquire("k") is None  # connected, script loaded
    # DEBUG SLEEP: the real server stops answering anyone for 3 s.
    sleeper = threading.Thread(target=_debug_sleep, args=(redis_server.port, 3))
    sleeper.start()
    await asyncio.sleep(0.2)
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    beat = asyncio.create_task(ticker())
    started = time.monotonic()
    try:
        decided = await quota.acquire("k")
        took = time.monotonic() - started
    finally:
        beat.cancel()
        sleeper.join()
        await quota.close()
    assert decided is None  # this replica's own bucket, full
    assert quota.health.errors == {"timeout": 1}
    # The call ended at its deadline, well before Redis woke, and the loop ran meanwhile.
    assert took < 3.0
    assert sum(1 for t in ticks if t < started + took) >= 2
