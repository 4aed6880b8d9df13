"""The soak's fault proxy (bench/soak/proxy.py) in front of the shared OpenSearch node.

Each mode is checked by what a client sees and by what the proxy counted; the node
itself is never touched (``go_down`` closes the proxy, not the node).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from bench.soak.proxy import PASS, Fault, FaultProxy

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]


async def _proxy(opensearch_url: str) -> FaultProxy:
    parts = urlsplit(opensearch_url)
    proxy = FaultProxy(parts.hostname or "127.0.0.1", parts.port or 80)
    await proxy.start()
    return proxy


async def test_pass_relays_the_node_verbatim_on_one_connection(opensearch_url: str) -> None:
    proxy = await _proxy(opensearch_url)
    try:
        async with httpx.AsyncClient() as direct, httpx.AsyncClient(base_url=proxy.url) as via:
            want = (await direct.get(f"{opensearch_url}/_cluster/health")).json()["cluster_name"]
            first = await via.get("/_cluster/health")
            head = await via.head("/")  # no body despite its content-length
            second = await via.get("/_cluster/health")
        assert first.status_code == second.status_code == 200
        assert first.json()["cluster_name"] == want
        assert head.status_code == 200
        assert head.content == b""
        assert proxy.counts["seen"] == proxy.counts["forwarded"] == 3
    finally:
        await proxy.close()


@pytest.mark.parametrize(("status", "retry_after"), [(429, "1"), (429, None), (503, "1")])
async def test_status_is_answered_by_the_proxy(
    opensearch_url: str, status: int, retry_after: str | None
) -> None:
    proxy = await _proxy(opensearch_url)
    proxy.fault = Fault("status", status=status, retry_after=retry_after)
    try:
        async with httpx.AsyncClient(base_url=proxy.url) as via:
            resp = await via.post("/a2m-none/_search", json={"size": 1})
            proxy.fault = PASS
            healthy = await via.get("/_cluster/health")  # same connection, kept alive
        assert resp.status_code == status
        assert resp.headers.get("retry-after") == retry_after
        assert resp.json()["status"] == status
        assert healthy.status_code == 200
        assert proxy.counts[f"status_{status}"] == 1
        assert proxy.counts["forwarded"] == 1
    finally:
        await proxy.close()


async def test_slow_still_answers(opensearch_url: str) -> None:
    proxy = await _proxy(opensearch_url)
    proxy.fault = Fault("slow", delay_s=0.2)
    try:
        async with httpx.AsyncClient(base_url=proxy.url) as via:
            resp = await via.get("/_cluster/health")
        assert resp.status_code == 200
        assert proxy.counts["slowed"] == 1
    finally:
        await proxy.close()


async def test_drop_resets_before_and_during_the_answer(opensearch_url: str) -> None:
    proxy = await _proxy(opensearch_url)
    proxy.fault = Fault("drop")
    try:
        for _ in range(2):  # the first reset before any byte, the second after half
            async with httpx.AsyncClient(base_url=proxy.url) as via:
                with pytest.raises(httpx.TransportError):
                    await via.get("/_cluster/health")
        assert proxy.counts["dropped"] == 2
        assert proxy.counts["forwarded"] == 0
    finally:
        await proxy.close()


async def test_down_refuses_and_up_serves_on_the_same_port(opensearch_url: str) -> None:
    proxy = await _proxy(opensearch_url)
    port = proxy.port
    try:
        await proxy.go_down()
        async with httpx.AsyncClient(base_url=proxy.url) as via:
            with pytest.raises(httpx.ConnectError):
                await via.get("/_cluster/health")
        await proxy.come_up()
        assert proxy.port == port
        async with httpx.AsyncClient(base_url=proxy.url) as via:
            assert (await via.get("/_cluster/health")).status_code == 200
    finally:
        await proxy.close()
