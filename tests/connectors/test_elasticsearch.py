"""ElasticsearchConnector against a real Elasticsearch node with SciFact loaded.

The shared suite (:class:`tests.connectors.conftest.LuceneSuite`) runs here
with engine 'elasticsearch'; Elasticsearch-only checks follow it.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.base import OrderedRequest
from tests.connectors.conftest import Loaded, LuceneSuite, make_connector, scifact_store

pytestmark = [pytest.mark.integration, pytest.mark.elasticsearch]


class TestElasticsearch(LuceneSuite):
    engine = "elasticsearch"
    # 8.14+ quantises float vectors (int8_hnsw) by default and scores the
    # quantised copy: about 4e-4 off the exact (1 + cos) / 2 here.
    knn_score_tolerance = 2e-3

    async def test_version_without_get_root(self, loaded: Loaded) -> None:
        # The integ-test distribution has no rest-root module: GET / answers 405.
        c = make_connector(scifact_store(loaded))
        info = await c.open()
        await c.close()
        assert info.engine.startswith("elasticsearch 8.")

    async def test_id_fielddata_is_off_so_the_pit_is_needed(
        self, loaded: Loaded, direct: Any
    ) -> None:
        """Why ordered reads over `_id` records use a PIT and `_shard_doc`."""
        from elasticsearch import BadRequestError

        with pytest.raises(BadRequestError):
            await direct.search(index=loaded.index, body={"sort": [{"_id": "asc"}], "size": 1})

    async def test_pit_is_released(self, loaded: Loaded, direct: Any) -> None:
        c = make_connector(scifact_store(loaded, mapping={"id": "_id"}))
        await c.open()
        try:
            before = await _open_contexts(direct)
            await c.ordered(OrderedRequest(limit=5))
            after = await _open_contexts(direct)
        finally:
            await c.close()
        assert after == before


async def _open_contexts(direct: Any) -> int:
    stats = await direct.indices.stats(metric="search")
    return int(stats.body["_all"]["total"]["search"]["open_contexts"])
