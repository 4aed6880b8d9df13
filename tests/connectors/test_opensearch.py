"""OpenSearchConnector against a real OpenSearch node (k-NN plugin, Lucene engine) with SciFact.

The shared suite (:class:`tests.connectors.conftest.LuceneSuite`) runs here
with engine 'opensearch'; OpenSearch-only checks follow it.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.errors import EngineConfigError
from tests.connectors.conftest import Loaded, LuceneSuite, make_connector, scifact_store

pytestmark = [pytest.mark.integration, pytest.mark.opensearch]


class TestOpenSearch(LuceneSuite):
    engine = "opensearch"

    async def test_cloud_id_is_refused(self, loaded: Loaded) -> None:
        config = scifact_store(loaded, connection={"hosts": [], "cloud_id": "x:eA=="})
        with pytest.raises(EngineConfigError, match=r"connection\.cloud_id"):
            await make_connector(config).open()

    async def test_no_shard_doc_so_engine_id_order_pages_by_from(
        self, loaded: Loaded, direct: Any
    ) -> None:
        """Why OpenSearch ordered reads over `_id` records sort on `_doc` and page by `from`."""
        from opensearchpy.exceptions import RequestError

        pit = await direct.create_pit(index=loaded.index, params={"keep_alive": "1m"})
        try:
            with pytest.raises(RequestError):
                await direct.search(
                    body={"pit": {"id": pit["pit_id"]}, "sort": [{"_shard_doc": "asc"}]}
                )
        finally:
            await direct.delete_pit(body={"pit_id": [pit["pit_id"]]})
