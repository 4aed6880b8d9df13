"""Per-principal rate limit: a token bucket per caller, -32006 QUOTA_EXCEEDED when empty."""

from __future__ import annotations

import json

from gateway.security.ratelimit import RateLimiter
from tests.security.support import (
    BOB_KEY,
    Issuer,
    MemoryConnector,
    acl_docs,
    asgi_client,
    auth_section,
    bearer,
    build_gateway,
    memory_store_config,
    rpc,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_allows_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.acquire("a") for _ in range(3)] == [None, None, None]
    wait = limiter.acquire("a")
    assert wait is not None
    assert 1 <= wait <= 500
    assert limiter.acquire("b") is None  # buckets are per key
    clock.now += 0.5  # one token at 2/s
    assert limiter.acquire("a") is None
    assert limiter.acquire("a") is not None
    clock.now += 100  # refills to the burst, no further
    assert [limiter.acquire("a") for _ in range(4)].count(None) == 3


def test_bucket_memory_is_bounded() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1.0, burst=1, max_keys=10, clock=clock)
    for i in range(1000):
        limiter.acquire(f"k{i}")
    assert len(limiter._buckets) == 10


async def test_quota_exceeded_over_http_is_per_principal(issuer: Issuer) -> None:
    server = {
        "auth": auth_section(issuer),
        "rate_limit": {"requests_per_second": 0.001, "burst": 3},
    }
    gateway = build_gateway(
        server, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )
    alice = bearer(issuer.token("alice"))
    bob = bearer(BOB_KEY)
    async with asgi_client(gateway) as client:

        async def code(headers: dict[str, str]) -> int | None:
            r = await client.post(
                "/a2m/docs",
                content=json.dumps(rpc("memory/describe", {})),
                headers={"content-type": "application/json", **headers},
            )
            assert r.status_code == 200
            err = r.json().get("error")
            if err is not None:
                assert err["code"] == -32006
                assert err["data"]["retry_after_ms"] > 0
            return None if err is None else int(err["code"])

        assert [await code(alice) for _ in range(3)] == [None, None, None]
        assert await code(alice) == -32006
        # A fresh token of the same subject is the same principal: still limited.
        assert await code(bearer(issuer.token("alice", exp_in=600))) == -32006
        assert await code(bob) is None
        # The well-known document answers 429 instead.
        r = await client.get("/.well-known/a2m-server.json", headers=alice)
        assert r.status_code == 429
    await gateway.close()
