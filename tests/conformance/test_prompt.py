"""prompt (§4.16): rendered text alongside records, never instead of them or changing them."""

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


@pytest.mark.parametrize("style", ["list", "cited", "transcript"])
@pytest.mark.parametrize("method", ["memory/recall", "memory/timeline"])
def test_records_identical_with_and_without_prompt(
    client: A2MClient, styles: list[str], style: str, method: str
) -> None:
    if style not in styles:
        pytest.skip(f"{style} not offered")
    params: dict[str, Any] = {"limit": 8}
    if method == "memory/recall":
        params["query"] = QUERY
    plain = client.call(method, params)
    rendered = client.call(method, {**params, "prompt": {"style": style}})
    assert rendered["records"] == plain["records"], "asking for text changed what was recalled"
    ids = [r["id"] for r in plain["records"]]
    assert isinstance(rendered["prompt"], str)
    assert set(rendered["prompt_ids"]) <= set(ids)
    # No budget: every record fits.
    assert sorted(rendered["prompt_ids"]) == sorted(ids)
    if style != "transcript":
        assert rendered["prompt_ids"] == ids, "without a budget, prompt_ids follow the ranking"
    for record in plain["records"]:
        assert squash(record.get("content", "")) in squash(rendered["prompt"])


def test_cited_carries_each_uri(client: A2MClient, styles: list[str]) -> None:
    if "cited" not in styles:
        pytest.skip("cited not offered")
    result = recall(client, prompt={"style": "cited"})
    included = {r["id"]: r for r in result["records"] if r["id"] in result["prompt_ids"]}
    assert included
    for record in included.values():
        if "uri" in record:
            assert record["uri"] in result["prompt"]


def _entry_budget(client: A2MClient, style: str) -> tuple[dict[str, Any], int]:
    """A budget that fits the first two records but not all of them."""
    full = recall(client, prompt={"style": style})
    assert len(full["records"]) >= 3
    per_record = []
    for record in full["records"]:
        alone = client.call(
            "memory/recall",
            {"where": {"id": record["id"]}, "prompt": {"style": style}},
        )
        per_record.append(len(alone["prompt"]) // 4 + 8)
    return full, per_record[0] + per_record[1] + 4


@pytest.mark.parametrize("style", ["list", "cited", "transcript"])
def test_budget_trims_whole_records(client: A2MClient, styles: list[str], style: str) -> None:
    if style not in styles:
        pytest.skip(f"{style} not offered")
    full, budget = _entry_budget(client, style)
    trimmed = recall(client, prompt={"style": style, "budget": budget})
    assert trimmed["records"] == full["records"], "a budget changed the records"
    kept = trimmed["prompt_ids"]
    ids = [r["id"] for r in full["records"]]
    assert 0 < len(kept) < len(ids), (budget, kept)
    assert set(kept) <= set(ids)
    if style != "transcript":
        assert kept == ids[: len(kept)], "trimming must drop from the tail of the ranking"
    by_id = {r["id"]: r for r in full["records"]}
    text = squash(trimmed["prompt"])
    for rid in kept:
        assert squash(by_id[rid].get("content", "")) in text, "a kept record was cut"
    for rid in set(ids) - set(kept):
        content = squash(by_id[rid].get("content", ""))
        if content and not any(content in squash(by_id[k].get("content", "")) for k in kept):
            assert content not in text, "a trimmed record's text is still in the prompt"
    tokenizer = client.call("memory/describe")["prompt"].get("tokenizer")
    if tokenizer == "chars/4":
        assert (len(trimmed["prompt"]) + 3) // 4 <= budget


def test_budget_too_small_for_any_record(client: A2MClient, styles: list[str]) -> None:
    plain = recall(client)
    result = recall(client, prompt={"style": "list", "budget": 1})
    assert result["records"] == plain["records"]
    assert result["prompt_ids"] == []
    assert result["prompt"].strip() == ""


@pytest.mark.parametrize(
    "prompt",
    [
        {"method": "model"},
        {"method": "bogus"},
        {"method": ""},
        {"model": "gpt-4o"},
        {"method": "template", "model": "some-model"},
        {"style": "haiku"},
        {"style": ""},
        {"budget": 0},
        {"budget": -5},
    ],
    ids=repr,
)
@pytest.mark.parametrize("method", ["memory/recall", "memory/timeline"])
def test_unoffered_prompt_options_are_invalid_params(
    client: A2MClient,
    styles: list[str],
    describe: dict[str, Any],
    prompt: dict[str, Any],
    method: str,
) -> None:
    offered = describe["prompt"]
    if prompt.get("method") in offered["methods"] and "model" not in prompt:
        pytest.skip("offered")
    if prompt.get("style") in styles:
        pytest.skip("offered")
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
        "memory/recall", {"where": {"no_such_field": "x"}, "prompt": {"style": "cited"}}
    )
    assert result["records"] == []
    assert result["prompt_ids"] == []
    assert isinstance(result["prompt"], str)
