from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.errors import InvalidParams
from gateway.params import PromptOptions
from gateway.prompt import check_options, estimate_tokens, render
from gateway.records import Record


def recs() -> list[Record]:
    return [
        Record(
            id="a",
            content="alpha " * 10,
            uri="docs/a.md",
            role="user",
            created_at=datetime(2026, 1, 3, tzinfo=UTC),
        ),
        Record(id="b", content="bravo " * 10, created_at=datetime(2026, 1, 1, tzinfo=UTC)),
        Record(
            id="c",
            content="charlie " * 10,
            role="assistant",
            created_at=datetime(2026, 1, 2, tzinfo=UTC),
        ),
    ]


def test_list_style_keeps_rank_order() -> None:
    out = render(recs(), PromptOptions(style="list"))
    assert out.ids == ["a", "b", "c"]
    assert out.text.splitlines()[0].startswith("- alpha")


def test_cited_numbers_passages_and_cites_uri() -> None:
    out = render(recs(), PromptOptions(style="cited"))
    assert out.text.startswith("[1] alpha")
    assert "source: docs/a.md" in out.text
    assert "[3] charlie" in out.text


def test_transcript_reads_in_creation_order() -> None:
    out = render(recs(), PromptOptions(style="transcript"))
    assert out.ids == ["b", "c", "a"]
    assert out.text.splitlines()[0].startswith("document: bravo")
    assert out.text.splitlines()[1].startswith("assistant: charlie")


def test_budget_drops_whole_records() -> None:
    full = render(recs(), PromptOptions(style="list"))
    one = estimate_tokens(full.text.splitlines()[0]) + 1
    out = render(recs(), PromptOptions(style="list", budget=one + 2))
    assert out.ids == ["a"]
    assert out.text == full.text.splitlines()[0]
    assert render(recs(), PromptOptions(budget=1)).ids == []


@pytest.mark.parametrize(
    "options",
    [
        PromptOptions(method="model"),
        PromptOptions(model="gpt-x"),
        PromptOptions(style="haiku"),
        PromptOptions(budget=10**9),
    ],
)
def test_unoffered_options_are_invalid_params(options: PromptOptions) -> None:
    with pytest.raises(InvalidParams):
        check_options(options, max_budget=100_000)
