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
        """Why OpenSearch ordered reads over `_id` records sort on `_doc` and page by `from`.

        2.x has no `_shard_doc`; 3.x has it in a PIT. The connector keeps `_doc` and
        `from` pages on both (the ordered-read tests pass on both versions).
        """
        from opensearchpy.exceptions import RequestError

        major = str((await direct.info())["version"]["number"]).split(".")[0]
        assert major in ("2", "3")
        pit = await direct.create_pit(index=loaded.index, params={"keep_alive": "1m"})
        body = {"pit": {"id": pit["pit_id"]}, "sort": [{"_shard_doc": "asc"}], "size": 3}
        try:
            if major == "2":
                with pytest.raises(RequestError):
                    await direct.search(body=body)
            else:
                assert len((await direct.search(body=body))["hits"]["hits"]) == 3
        finally:
            await direct.delete_pit(body={"pit_id": [pit["pit_id"]]})
