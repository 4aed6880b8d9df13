"""prompt (canonical §4.16): rendered text alongside records, never instead of them or
changing them. Methods template / none, styles auto / facts / transcript, a budget in
characters, cite."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.conftest import A2MClient

pytestmark = pytest.mark.integration

INVALID_PARAMS = -32602
QUERY = "store configuration mapping fields"


@pytest.fixture
def styles(describe: dict[str, Any]) -> list[str]:
    if "prompt" not in describe["capabilities"]:
        pytest.skip("prompt not declared")
    offered: list[str] = describe["prompt"]["styles"]
    return offered


def squash(text: str) -> str:
    return " ".join(text.split())


def recall(client: A2MClient, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.call("memory/recall", {"query": QUERY, "limit": 8, **params})
    return result


def test_no_prompt_unless_asked(client: A2MClient, styles: list[str]) -> None:
    for params in ({}, {"prompt": False}, {"prompt": None}):
        result = recall(client, **params)
        assert "prompt" not in result
        assert "prompt_ids" not in result


def test_prompt_true_uses_the_defaults(client: A2MClient, styles: list[str]) -> None:
    plain = recall(client)
    result = recall(client, prompt=True)
    assert result["records"] == plain["records"]
    assert isinstance(result["prompt"], str)
    assert result["prompt"]
    assert result["prompt_ids"] == [r["id"] for r in plain["records"]] or set(
        result["prompt_ids"]
    ) == {r["id"] for r in plain["records"]}


CANONICAL_STYLES = ["auto", "facts", "transcript"]


def test_describe_offers_exactly_the_canonical_prompt(describe: dict[str, Any]) -> None:
    if "prompt" not in describe["capabilities"]:
        pytest.skip("prompt not declared")
    offered = describe["prompt"]
    assert sorted(offered["styles"]) == sorted(CANONICAL_STYLES)
    assert sorted(offered["methods"]) == ["none", "template"]
    assert "tokenizer" not in offered, "the budget is in characters, not tokens"


@pytest.mark.parametrize("style", CANONICAL_STYLES)
@pytest.mark.parametrize("method", ["memory/recall", "memory/timeline"])
def test_records_identical_with_and_without_prompt(
    client: A2MClient, styles: list[str], style: str, method: str
) -> None:
    params: dict[str, Any] = {"limit": 8}
    if method == "memory/recall":
        params["query"] = QUERY
    plain = client.call(method, params)
    rendered = client.call(method, {**params, "prompt": {"style": style}})
    assert rendered["records"] == plain["records"], "asking for text changed what was recalled"
    assert plain["records"], "nothing to render"
    ids = [r["id"] for r in plain["records"]]
    assert isinstance(rendered["prompt"], str)
    # No budget: every record fits.
    assert sorted(rendered["prompt_ids"]) == sorted(ids)
    if style != "transcript":
        assert rendered["prompt_ids"] == ids, "without a budget, prompt_ids follow the order"
    for record in plain["records"]:
        assert squash(record.get("content", "")) in squash(rendered["prompt"])


def test_method_none_renders_nothing(client: A2MClient, styles: list[str]) -> None:
    plain = recall(client)
    for prompt in ({"method": "none"}, {"method": "none", "style": "facts", "budget": 10}):
        result = recall(client, prompt=prompt)
        assert result == plain, "method none: no prompt field, records unchanged"


def test_cite_marks_each_entry_with_its_uri_or_key(client: A2MClient, styles: list[str]) -> None:
    result = recall(client, prompt={"style": "facts", "cite": True})
    plain = recall(client, prompt={"style": "facts"})
    included = [r for r in result["records"] if r["id"] in result["prompt_ids"]]
    assert included
    sources = [r.get("uri") or r.get("key") for r in included]
    assert any(sources), "the demo corpus maps uri and key"
    for source in sources:
        if source:
            assert f"[{source}]" in result["prompt"]
            assert f"[{source}]" not in plain["prompt"], "without cite, no source marks"


def test_budget_is_characters_and_trims_whole_records(client: A2MClient, styles: list[str]) -> None:
    full = recall(client, prompt={"style": "facts"})
    lines = full["prompt"].split("\n")
    assert len(lines) == len(full["records"]) >= 3
    budget = len(lines[0]) + 1 + len(lines[1])  # exactly the first two entries
    for b in (budget, budget + 1):
        trimmed = recall(client, prompt={"style": "facts", "budget": b})
        assert trimmed["records"] == full["records"], "a budget changed the records"
        ids = [r["id"] for r in full["records"]]
        assert trimmed["prompt_ids"] == ids[:2], (b, trimmed["prompt_ids"])
        assert len(trimmed["prompt"]) <= b
        assert trimmed["prompt"] == "\n".join(lines[:2]), "a kept record was cut"
    one = recall(client, prompt={"style": "facts", "budget": budget - 1})
    assert one["prompt_ids"] == [full["records"][0]["id"]]
    assert len(one["prompt"]) <= budget - 1


def test_budget_too_small_for_any_record(client: A2MClient, styles: list[str]) -> None:
    plain = recall(client)
    for budget in (0, 1):
        result = recall(client, prompt={"style": "facts", "budget": budget})
        assert result["records"] == plain["records"]
        assert result["prompt_ids"] == []
        assert result["prompt"] == ""


@pytest.mark.parametrize(
    "prompt",
    [
        {"method": "model"},
        {"method": "bogus"},
        {"method": ""},
        {"model": "gpt-4o"},
        {"method": "template", "model": "some-model"},
        {"style": "haiku"},
        {"style": "list"},
        {"style": "cited"},
        {"style": ""},
        {"budget": -5},
        {"budget": "120"},
        {"cite": "yes"},
    ],
    ids=repr,
)
@pytest.mark.parametrize("method", ["memory/recall", "memory/timeline"])
def test_unoffered_prompt_options_are_invalid_params(
    client: A2MClient, styles: list[str], prompt: dict[str, Any], method: str
) -> None:
    params: dict[str, Any] = {"prompt": prompt, "limit": 3}
    if method == "memory/recall":
        params["query"] = QUERY
    # §4.16: never silently substitute another method, model or style.
    assert client.error_code(method, params) == INVALID_PARAMS


def test_budget_within_and_beyond_the_declared_maximum(
    client: A2MClient, styles: list[str], describe: dict[str, Any]
) -> None:
    top = describe["prompt"].get("max_budget")
    if top is None:
        pytest.skip("no max_budget declared")
    assert "prompt" in recall(client, prompt={"budget": top})
    assert client.error_code("memory/recall", {"query": QUERY, "prompt": {"budget": top + 1}}) == (
        INVALID_PARAMS
    )


def test_prompt_on_an_empty_result(client: A2MClient, styles: list[str]) -> None:
    result = client.call(
        "memory/recall", {"where": {"no_such_field": "x"}, "prompt": {"cite": True}}
    )
    assert result["records"] == []
    assert result["prompt_ids"] == []
    assert result["prompt"] == ""
