"""Bad tool arguments name the argument and what is wrong with it, within the input schema's
bounds; the tools' descriptions name the store they read. No store is opened: every check
here runs before a call reaches one."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.demo import default_demo_config
from gateway.mcp.tools import Endpoint, McpTools
from gateway.runtime import Gateway
from gateway.security.scopes import LOCAL


def _tools(**extra_stores: Any) -> McpTools:
    cfg = default_demo_config(hybrid=False)
    if extra_stores:
        dumped = cfg.model_dump(mode="json", exclude_none=True)
        dumped["stores"].update(extra_stores)
        cfg = type(cfg).model_validate(dumped)
    return McpTools(Gateway(cfg), cfg.server.mcp)


async def _error(tools: McpTools, name: str, args: dict[str, Any]) -> str:
    result = await tools.call(Endpoint(), name, args, LOCAL)
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("search", {}, "'query' is missing"),
        ("search", {"query": 5}, "'query': expected a string"),
        ("search", {"query": ""}, "'query' must not be empty"),
        ("search", {"query": "x", "limit": -1}, "'limit' must be between 1 and 100"),
        ("search", {"query": "x", "limit": 0}, "'limit' must be between 1 and 100"),
        ("search", {"query": "x", "limit": 101}, "'limit' must be between 1 and 100"),
        ("search", {"query": "x", "limit": "5"}, "'limit': expected an integer"),
        ("timeline", {"limit": 500}, "'limit' must be between 1 and 100"),
        ("fetch", {}, "'id' is missing"),
        ("search", {"query": "x", "colour": "red"}, "'colour' is not an argument of this call"),
    ],
)
async def test_a_bad_argument_is_named_with_its_problem(
    name: str, args: dict[str, Any], message: str
) -> None:
    text = await _error(_tools(), name, args)
    assert message in text, text
    assert "missing, of the wrong type or out of range" not in text


async def test_the_limit_error_agrees_with_the_input_schema() -> None:
    tools = _tools()
    search = next(t for t in await tools.list_tools(Endpoint()) if t.name == "search")
    limit = search.input_schema["properties"]["limit"]
    text = await _error(tools, "search", {"query": "x", "limit": limit["maximum"] + 1})
    assert f"between {limit['minimum']} and {limit['maximum']}" in text


async def test_descriptions_name_the_store_they_read() -> None:
    tools = await _tools().list_tools(Endpoint())
    search = next(t for t in tools if t.name == "search")
    assert search.description is not None
    assert search.description.startswith("Search the store 'demo' and get ranked results")
    assert "About it: Documentation of A2M" in search.description
    assert "the stores demo" not in search.description


async def test_on_several_stores_the_description_names_each_and_the_argument() -> None:
    second = {
        "backend": "qdrant",
        "index": "notes",
        "connection": {"location": ":memory:"},
        "mapping": {"content": "body"},
        "search": {"mode": "lexical", "sparse_vector": "s"},
    }
    tools = await _tools(notes=second).list_tools(Endpoint())
    search = next(t for t in tools if t.name == "search")
    assert search.description is not None
    assert search.description.startswith(
        "Search the stores 'demo' and 'notes' (pick one with `store`; default 'demo')"
    )
    assert "About it" not in search.description


async def test_the_where_schema_names_the_keys_the_store_can_test() -> None:
    tools = await _tools().list_tools(Endpoint())
    search = next(t for t in tools if t.name == "search")
    where = search.input_schema["properties"]["where"]
    assert (
        "The keys this store can test: id, key, group, uri, media_type, title;"
        in (where["description"])
    )
    assert list(where["properties"]) == ["id", "key", "group", "uri", "media_type", "title"]
