"""scope.forward_credential: a caller's view of the connector sends the caller's credential.

A recording pass-through proxy sits between the connector and the real engine:
the engine answers every request (its security is off in the test nodes, so it
ignores credentials), and the proxy shows which Authorization each request carried.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors.base import OrderedRequest, SearchRequest
from tests.connectors.conftest import Loaded, make_connector, scifact_store
from tests.support.recording_proxy import Recorded, recording_proxy

pytestmark = [pytest.mark.integration]


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[Recorded]]]:
    loaded: Loaded = request.getfixturevalue(request.param)
    with recording_proxy(loaded.url) as relay:
        yield relay


def _credentials(seen: list[Recorded]) -> set[str | None]:
    return {r.authorization for r in seen}


@pytest.mark.parametrize(
    ("proxy", "loaded_name"),
    [
        pytest.param("os_loaded", "os_loaded", marks=pytest.mark.opensearch),
        pytest.param("es_loaded", "es_loaded", marks=pytest.mark.elasticsearch),
    ],
    indirect=["proxy"],
)
async def test_caller_view_sends_the_callers_credential(
    proxy: tuple[str, list[Recorded]], loaded_name: str, request: pytest.FixtureRequest
) -> None:
    url, seen = proxy
    loaded: Loaded = request.getfixturevalue(loaded_name)
    store = scifact_store(
        loaded,
        connection={"hosts": [url], "bearer_token": "gateway-own-token", "timeout_ms": 30_000},
        search={"mode": "lexical", "text_fields": ["title", "text"], "embedder": {"kind": "none"}},
    )
    conn = make_connector(store)
    await conn.open()
    try:
        seen.clear()
        own = await conn.search(SearchRequest(limit=3, text="cancer"))
        assert own
        assert seen
        assert _credentials(seen) == {"Bearer gateway-own-token"}

        seen.clear()
        view = conn.for_caller("Bearer caller-jwt")
        as_caller = await view.search(SearchRequest(limit=3, text="cancer"))
        assert [h.id for h in as_caller] == [h.id for h in own]
        await view.ordered(OrderedRequest(limit=3))
        assert seen
        assert _credentials(seen) == {"Bearer caller-jwt"}
        await view.close()  # a view never closes the shared client

        seen.clear()
        assert await conn.search(SearchRequest(limit=3, text="cancer"))
        assert _credentials(seen) == {"Bearer gateway-own-token"}
    finally:
        await conn.close()
