"""The federations: section is validated against the stores it names."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.federation.federation import decode_id, encode_id


def _store() -> dict[str, Any]:
    return {
        "backend": "elasticsearch",
        "index": "docs",
        "connection": {"hosts": ["http://127.0.0.1:9200"]},
        "mapping": {"content": "body", "created_at": "ts"},
        "search": {"text_fields": ["body"]},
    }


def _config(federations: Any) -> dict[str, Any]:
    return {"stores": {"a": _store(), "b": _store()}, "federations": federations}


def test_members_take_a_name_or_a_weighted_entry() -> None:
    cfg = parse_config(_config({"both": {"members": ["a", {"store": "b", "weight": 2}]}}))
    fed = cfg.federations["both"]
    assert [(m.store, m.weight) for m in fed.members] == [("a", 1.0), ("b", 2.0)]
    assert fed.rrf_k == 60
    assert fed.deadline_ms is None


@pytest.mark.parametrize(
    ("federations", "message"),
    [
        ({"both": {"members": ["a", "nope"]}}, "member 'nope' is not a store"),
        ({"a": {"members": ["b"]}}, "a store has that name already"),
        ({"both": {"members": ["a", "a"]}}, "a store appears twice"),
        ({"both": {"members": []}}, "members"),
        ({"both": {"members": [{"store": "a", "weight": -1}]}}, "weight"),
        ({"Bad Name": {"members": ["a"]}}, "federations.Bad Name"),
    ],
)
def test_bad_federations_are_refused_with_the_field_named(federations: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(_config(federations))


def test_ids_carry_their_member() -> None:
    assert encode_id("es", "a:b") == "es:a:b"
    assert decode_id("es:a:b") == ("es", "a:b")
    assert decode_id("plain") is None
    assert decode_id(":x") is None
