"""A2M params errors name the field and what is wrong with it, never pydantic's text."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.a2m.errors import ErrorCode, InvalidParams
from gateway.a2m.params import FetchParams, RecallParams, parse_params


@pytest.mark.parametrize(
    ("model", "params", "message", "fields"),
    [
        (RecallParams, {"query": 5}, "'query': expected a string", ["query"]),
        (RecallParams, {"limit": -1}, "'limit' must be 0 or more", ["limit"]),
        (RecallParams, {"limit": "5"}, "'limit': expected an integer", ["limit"]),
        (FetchParams, {}, "'key' is missing", ["key"]),
        (FetchParams, {"key": ""}, "'key' must not be empty", ["key"]),
        (RecallParams, {"prompt": "yes"}, "'prompt': expected true or false or an object", None),
        (RecallParams, {"where": {"k": []}}, "where.k is an empty any-of list", ["where"]),
    ],
)
def test_the_message_names_the_field_and_the_problem(
    model: Any, params: dict[str, Any], message: str, fields: list[str] | None
) -> None:
    with pytest.raises(InvalidParams) as info:
        parse_params(model, params)
    assert info.value.code is ErrorCode.INVALID_PARAMS
    assert message in info.value.message
    assert "missing, of the wrong type or out of range" not in info.value.message
    assert isinstance(info.value.data, dict)
    assert info.value.data["fields"] == (fields or ["prompt"])


def test_a_wrong_value_is_never_echoed() -> None:
    with pytest.raises(InvalidParams) as info:
        parse_params(RecallParams, {"query": ["secret-looking-value"]})
    assert "secret-looking-value" not in info.value.message
