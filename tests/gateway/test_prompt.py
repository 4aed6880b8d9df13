"""prompt rendering (canonical A2M §4.16): methods, styles, character budget, cite."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.a2m.errors import InvalidParams
from gateway.a2m.params import PromptOptions
from gateway.a2m.records import Record
from gateway.front.prompt import check_options, render, resolve_style, wanted


def facts() -> list[Record]:
    return [
        Record(
            id="a",
            content="alpha " * 10,
            uri="docs/a.md",
            key="k/a",
            created_at=datetime(2026, 1, 3, tzinfo=UTC),
        ),
        Record(
            id="b", content="bravo " * 10, key="k/b", created_at=datetime(2026, 1, 1, tzinfo=UTC)
        ),
        Record(id="c", content="charlie " * 10, created_at=datetime(2026, 1, 2, tzinfo=UTC)),
    ]


def turns() -> list[Record]:
    return [
        Record(
            id="t2",
            content="hi, how can I help?",
            role="assistant",
            created_at=datetime(2026, 1, 2, tzinfo=UTC),
        ),
        Record(id="t1", content="hello", role="user", created_at=datetime(2026, 1, 1, tzinfo=UTC)),
    ]


def test_defaults_are_template_auto_no_budget_no_cite() -> None:
    options = PromptOptions()
    assert (options.method, options.style, options.budget, options.cite) == (
        "template",
        "auto",
        None,
        False,
    )


def test_auto_is_facts_for_documents_and_transcript_for_conversation_turns() -> None:
    assert resolve_style("auto", facts()) == "facts"
    assert resolve_style("auto", turns()) == "transcript"
    # One record without a conversation role makes the set documents, not a conversation.
    mixed = [*turns(), Record(id="d", content="doc", role="document")]
    assert resolve_style("auto", mixed) == "facts"
    assert render(turns(), PromptOptions()).text == "user: hello\nassistant: hi, how can I help?"


def test_facts_keep_rank_order() -> None:
    out = render(facts(), PromptOptions(style="facts"))
    assert out.ids == ["a", "b", "c"]
    assert out.text.splitlines() == ["- " + " ".join(r.content.split()) for r in facts()]  # type: ignore[union-attr]


def test_transcript_reads_in_creation_order() -> None:
    out = render(facts(), PromptOptions(style="transcript"))
    assert out.ids == ["b", "c", "a"]
    assert out.text.splitlines()[0].startswith("memory: bravo")


def test_cite_marks_each_entry_with_its_uri_else_its_key() -> None:
    lines = render(facts(), PromptOptions(style="facts", cite=True)).text.splitlines()
    assert lines[0].endswith(" [docs/a.md]")
    assert lines[1].endswith(" [k/b]")
    assert "[" not in lines[2]  # neither uri nor key: nothing to cite
    assert "[" not in render(facts(), PromptOptions(style="facts")).text


def test_budget_is_characters_and_drops_whole_records() -> None:
    full = render(facts(), PromptOptions(style="facts"))
    first, second = full.text.splitlines()[:2]
    exact = len(first) + 1 + len(second)
    out = render(facts(), PromptOptions(style="facts", budget=exact))
    assert out.ids == ["a", "b"]
    assert out.text == f"{first}\n{second}"
    assert len(out.text) == exact
    short = render(facts(), PromptOptions(style="facts", budget=exact - 1))
    assert short.ids == ["a"]
    assert short.text == first
    assert render(facts(), PromptOptions(budget=0)).ids == []
    for budget in range(0, len(full.text) + 2, 7):
        assert len(render(facts(), PromptOptions(budget=budget)).text) <= budget


def test_timeline_budget_keeps_the_newest_turns() -> None:
    records = list(reversed(turns()))  # a timeline: oldest first
    last = len("assistant: hi, how can I help?")
    out = render(records, PromptOptions(budget=last), prefer_newest=True)
    assert out.ids == ["t2"]


def test_method_none_renders_nothing() -> None:
    assert not wanted(PromptOptions(method="none"))
    assert wanted(PromptOptions())
    assert not wanted(None)


@pytest.mark.parametrize(
    "options",
    [
        PromptOptions(method="model"),
        PromptOptions(model="gpt-x"),
        PromptOptions(style="haiku"),
        PromptOptions(style="list"),
        PromptOptions(style="cited"),
        PromptOptions(budget=10**9),
    ],
)
def test_unoffered_options_are_invalid_params(options: PromptOptions) -> None:
    with pytest.raises(InvalidParams):
        check_options(options, max_budget=100_000)


@pytest.mark.parametrize("method", ["template", "none"])
def test_offered_methods_pass(method: str) -> None:
    check_options(PromptOptions(method=method, style="auto", cite=True, budget=10), 100_000)
