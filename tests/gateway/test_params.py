"""A2M params errors name the field and what is wrong with it, never pydantic's text."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.a2m.errors import ErrorCode, InvalidParams
from gateway.a2m.params import FetchParams, RecallParams, limit_out_of_range, parse_params
from gateway.mcp.tools import Endpoint, McpTools
from gateway.security.scopes import LOCAL
from tests.security.support import MemoryConnector, acl_docs, build_gateway, memory_store_config


@pytest.mark.parametrize(
    ("model", "params", "message", "fields"),
    [
        (RecallParams, {"query": 5}, "'query': expected a string", ["query"]),
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


@pytest.mark.parametrize("limit", [-1, 101])
async def test_a_limit_out_of_range_reads_the_same_on_a2m_and_mcp(limit: int) -> None:
    # One rule per door, one wording: A2M allows 0 (as many as the store allows), MCP 1.
    gateway = build_gateway(
        {}, {"docs": memory_store_config()}, {"docs": MemoryConnector(acl_docs())}
    )
    with pytest.raises(InvalidParams) as info:
        await gateway.dispatcher("docs").dispatch("memory/recall", {"query": "x", "limit": limit})
    assert info.value.message == f"Invalid params: {limit_out_of_range(0, 100)}"
    assert info.value.data == {"fields": ["limit"]}
    tools = McpTools(gateway, gateway.config.server.mcp)
    result = await tools.call(Endpoint(), "search", {"query": "x", "limit": limit}, LOCAL)
    text = result.content[0].text  # type: ignore[union-attr]
    assert limit_out_of_range(1, 100) in text
    await gateway.close()
