"""The one capability gate, on a store that maps no key.

Every conformance store maps a key, so "fetch without keys" was always skipped there.
Gating is engine-independent: an in-memory connector stands in for the engine.
"""

from __future__ import annotations

import pytest

from gateway.a2m.errors import A2MError
from tests.security.support import MemoryConnector, acl_docs, build_gateway, memory_store_config


async def test_fetch_without_keys_is_capability_not_supported() -> None:
    gateway = build_gateway(
        {}, {"docs": memory_store_config(key=None)}, {"docs": MemoryConnector(acl_docs())}
    )
    d = gateway.dispatcher("docs")
    described = await d.dispatch("memory/describe", {})
    assert "keys" not in described["capabilities"]
    assert "memory/fetch" not in described["methods"]
    for method, params in [
        ("memory/fetch", {"key": "a/b"}),
        ("memory/recall", {"query": "x", "key_prefix": "a/"}),
        ("memory/timeline", {"key_prefix": "a/"}),
    ]:
        with pytest.raises(A2MError) as err:
            await d.dispatch(method, params)
        assert int(err.value.code) == -32003, method
    await gateway.close()


async def test_with_keys_the_same_calls_answer() -> None:
    # Control: the same store with its key mapped serves every one of them.
    gateway = build_gateway(
        {}, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )
    d = gateway.dispatcher("docs")
    assert "keys" in (await d.dispatch("memory/describe", {}))["capabilities"]
    fetched = await d.dispatch("memory/fetch", {"key": "doc/3"})
    assert fetched["record"]["key"] == "doc/3"
    # A key nobody holds is answered (no record), not refused.
    assert (await d.dispatch("memory/fetch", {"key": "a/b"}))["record"] is None
    timeline = await d.dispatch("memory/timeline", {"key_prefix": ""})
    assert timeline["records"]
    await gateway.close()
