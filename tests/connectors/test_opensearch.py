"""The Lucene connector on OpenSearch (k-NN plugin, Lucene engine) against a real node with SciFact.

The shared suite (:class:`tests.connectors.conftest.LuceneSuite`) runs here
with engine 'opensearch'; OpenSearch-only checks follow it.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectors.errors import EngineConfigError
from tests.connectors.conftest import Loaded, LuceneSuite, make_connector, scifact_store
from tests.support.recording_proxy import recording_proxy

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

    async def test_a_signed_store_still_signs_every_request(
        self, loaded: Loaded, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # SigV4 needs the connection class that calls a signer per request; the
        # Retry-After class wraps it and must keep calling it. A stand-in signer (the
        # real one needs botocore and credentials; the test node checks none) and a
        # proxy that reads every request's Authorization.
        from types import SimpleNamespace

        import connectors.lucene.opensearch as opensearch
        from connectors.base import SearchRequest

        signed: list[str] = []

        def signer(credentials: Any, region: str, service: str) -> Any:
            def sign(*, method: str, url: str, body: Any, headers: Any) -> dict[str, str]:
                signed.append(method)
                return {"authorization": f"AWS4-HMAC-SHA256 stand-in {region}/{service}"}

            return sign

        credentials = SimpleNamespace(access_key="AKIDEXAMPLE", secret_key="s", token=None)
        monkeypatch.setattr(opensearch, "aws_credentials", lambda: credentials)
        monkeypatch.setattr(opensearch, "_sigv4_auth", signer)
        with recording_proxy(loaded.url) as (url, seen):
            spec = scifact_store(
                loaded,
                connection={"hosts": [url], "aws_sigv4": {"region": "eu-west-1"}},
                search={"mode": "lexical"},
            )
            conn = make_connector(spec)
            await conn.open()
            try:
                assert await conn.search(SearchRequest(limit=3, text="vitamin D"))
            finally:
                await conn.close()
        assert seen
        assert len(signed) == len(seen)
        assert all(r.authorization == "AWS4-HMAC-SHA256 stand-in eu-west-1/es" for r in seen)
