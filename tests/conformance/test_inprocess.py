"""In-process binding (§8.1): the same answers as HTTP, through the same JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.runtime import Gateway
from gateway.transports.inprocess import A2MRemoteError, InProcessClient
from tests.conformance.conftest import NO_PARAMS, PROTOCOL, HttpClient, StoreBackend
from tests.support.wire import assert_response

pytestmark = pytest.mark.integration


class CheckedInProcessClient(InProcessClient):
    """The in-process client, with every response held to the A2M 0.1 wire schema."""

    async def send(
        self, message: dict[str, Any] | list[Any] | str | bytes
    ) -> dict[str, Any] | None:
        response = await super().send(message)
        if response is not None:
            method = message.get("method") if isinstance(message, dict) else None
            assert_response(response, method if isinstance(method, str) else None, "inprocess")
        return response


@pytest.fixture(scope="module")
async def inprocess(backend: StoreBackend) -> AsyncIterator[InProcessClient]:
    """The HTTP server's store, in process (the demo: a second, separately indexed copy)."""
    gateway = Gateway(backend.gateway_config())
    await gateway.start()
    try:
        yield CheckedInProcessClient(gateway.dispatcher())
    finally:
        await gateway.close()


def _stable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records as compared across two separately indexed demo stores (or one ES/OS index)."""
    return [{k: v for k, v in r.items() if k != "score"} for r in records]


async def test_describe_is_the_same(inprocess: InProcessClient, http_client: HttpClient) -> None:
    ours = await inprocess.call("memory/describe", {"protocol": PROTOCOL})
    assert ours == http_client.call("memory/describe", {"protocol": PROTOCOL})


@pytest.mark.parametrize(
    "params",
    [
        {"query": "qdrant collection", "limit": 5},
        {"query": "origin header", "limit": 3, "prompt": {"style": "facts", "cite": True}},
        {"limit": 4},
    ],
    ids=["query", "prompt", "no-query"],
)
async def test_recall_is_the_same(
    inprocess: InProcessClient, http_client: HttpClient, params: dict[str, Any]
) -> None:
    ours = await inprocess.call("memory/recall", params)
    theirs = http_client.call("memory/recall", params)
    assert _stable(ours["records"]) == _stable(theirs["records"])
    for a, b in zip(ours["records"], theirs["records"], strict=True):
        assert a["score"] == pytest.approx(b["score"], abs=1e-6)
    assert ours.get("prompt") == theirs.get("prompt")
    assert ours.get("prompt_ids") == theirs.get("prompt_ids")


async def test_timeline_and_fetch_are_the_same(
    inprocess: InProcessClient, http_client: HttpClient
) -> None:
    ours = await inprocess.call("memory/timeline", {"limit": 10})
    theirs = http_client.call("memory/timeline", {"limit": 10})
    assert ours == theirs
    keyed = [r for r in ours["records"] if "key" in r]
    if keyed:
        key = keyed[0]["key"]
        assert await inprocess.call("memory/fetch", {"key": key}) == http_client.call(
            "memory/fetch", {"key": key}
        )


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("memory/bogus", {}),
        ("memory/remember", {"records": []}),
        ("memory/consolidate", None),
        ("memory/recall", {"limit": "x"}),
        ("memory/fetch", {"key": ""}),
    ],
    ids=lambda v: repr(v)[:30],
)
async def test_errors_are_the_same(
    inprocess: InProcessClient,
    http_client: HttpClient,
    method: str,
    params: dict[str, Any] | None,
) -> None:
    with pytest.raises(A2MRemoteError) as caught:
        await inprocess.call(method, params)
    expected = http_client.error(method, NO_PARAMS if params is None else params)
    assert caught.value.code == expected["code"]


async def test_raw_messages_are_the_same(inprocess: InProcessClient) -> None:
    assert await inprocess.send({"jsonrpc": "2.0", "method": "memory/describe"}) is None
    batch = await inprocess.send([{"jsonrpc": "2.0", "id": 1, "method": "memory/describe"}])
    assert batch is not None
    assert batch["error"]["code"] == -32600
    assert batch["id"] is None
    parse = await inprocess.send(b"{nope")
    assert parse is not None
    assert parse["error"]["code"] == -32700
