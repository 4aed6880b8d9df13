"""Exposure control: only mapped fields leave the gateway, whatever the engine holds.

The engine's documents carry an ACL field, an unmapped `secret_note` and an
unlisted metadata-like field; none of them may appear in any answer, nor be
usable in `where`, on any method. Real engines are covered in
``test_scoped_engines.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.a2m.dispatcher import Dispatcher
from gateway.config import parse_config
from gateway.store.store import Store
from gateway.transports.inprocess import InProcessClient
from tests.security.support import MemoryConnector, acl_docs, memory_store_config
from tests.support.spec import RECORD_FIELDS

SCOPE = {"filters": [{"field": "acl", "claims": ["groups"]}]}


def client_of(**store: Any) -> tuple[InProcessClient, MemoryConnector]:
    cfg = parse_config({"stores": {"docs": memory_store_config(**store)}})
    engine = MemoryConnector(acl_docs())
    return InProcessClient(Dispatcher(Store("docs", cfg.stores["docs"], engine))), engine


async def every_answer(client: InProcessClient) -> list[Any]:
    answers = [
        await client.call("memory/describe", {}),
        await client.call("memory/recall", {"query": "deploy keys", "limit": 100}),
        await client.call("memory/recall", {"limit": 100, "embeddings": True}),
        await client.call(
            "memory/timeline", {"limit": 100, "prompt": {"style": "facts", "cite": True}}
        ),
        await client.call("memory/recall", {"query": "deploy", "prompt": {"style": "transcript"}}),
    ]
    answers += [await client.call("memory/fetch", {"key": f"doc/{i}"}) for i in range(8)]
    return answers


def records_of(answers: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for a in answers:
        out.extend(a.get("records", []))
        if a.get("record"):
            out.append(a["record"])
    return out


async def test_only_mapped_fields_leave_the_gateway() -> None:
    client, engine = client_of()
    answers = await every_answer(client)
    records = records_of(answers)
    assert len(records) > 100
    for r in records:
        assert set(r) <= RECORD_FIELDS
        assert set(r.get("metadata", {})) <= {"lang"}
    wire = json.dumps(answers)
    for _, source in engine.docs:
        assert source["secret_note"] not in wire
    for unexposed in ("secret_note", "classified", "team-a", "team-b", "team-c", '"acl"', '"own"'):
        assert unexposed not in wire


@pytest.mark.parametrize(
    "where", [{"acl": "team-a"}, {"secret_note": "classified-1"}, {"own": "bob"}]
)
async def test_where_on_an_unexposed_field_matches_nothing_without_asking(
    where: dict[str, Any],
) -> None:
    client, engine = client_of()
    for method, params in (
        ("memory/recall", {"query": "deploy", "where": where}),
        ("memory/recall", {"where": where}),
        ("memory/timeline", {"where": where}),
    ):
        assert (await client.call(method, params))["records"] == []
    assert engine.calls == 0


async def test_where_on_the_metadata_allow_list_works() -> None:
    client, _ = client_of()
    got = await client.call("memory/timeline", {"where": {"lang": "en"}, "limit": 100})
    assert len(got["records"]) == 60


async def test_scope_fields_are_fetched_only_when_mapped() -> None:
    cfg = parse_config({"stores": {"docs": memory_store_config(scope=SCOPE)}})
    fields = cfg.stores["docs"].mapping.source_fields()
    # The engine is asked for mapped fields only: a scope's ACL field is filtered on,
    # never read back.
    assert "acl" not in fields
    assert "secret_note" not in fields
    assert "own" in fields  # mapping.owner: mapped on purpose


async def test_an_acl_field_mapped_on_purpose_is_returned() -> None:
    client, _ = client_of(metadata=["lang", "acl"])
    got = await client.call("memory/timeline", {"limit": 4})
    assert len(got["records"]) == 4
    assert all("acl" in r["metadata"] for r in got["records"])
