"""The tool table: each tool over an entry of the A2M method registry."""

from __future__ import annotations

import pytest

from gateway.a2m.methods import METHODS
from gateway.mcp.schemas import TOOLS, SearchArgs, Tool


def test_every_argument_a_tool_passes_is_a_param_of_its_method() -> None:
    for tool in TOOLS.values():
        assert tool.method is METHODS[tool.method.name]
        params = tool.method.params
        assert params is not None
        assert tool.passes or tool.own, tool.name
        assert set(tool.passes) <= set(params.model_fields), tool.name
        assert "store" not in tool.passes


def test_the_tools_call_recall_timeline_and_fetch_by_key() -> None:
    assert {n: t.method.name for n, t in TOOLS.items()} == {
        "search": "memory/recall",
        "fetch": "memory/recall",
        "timeline": "memory/timeline",
    }
    by_key = TOOLS["fetch"].by_key
    assert by_key is not None
    assert by_key.name == "memory/fetch"
    assert TOOLS["fetch"].passes == ()
    assert TOOLS["search"].passes == ("query", "limit", "where", "key_prefix")


def test_an_argument_its_method_does_not_take_is_refused_when_the_table_is_built() -> None:
    with pytest.raises(TypeError, match=r"\['query'\] are not memory/timeline params"):
        Tool("search", "Search", SearchArgs, METHODS["memory/timeline"], {})
