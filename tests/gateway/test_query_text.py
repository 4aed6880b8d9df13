"""The lexical leg's text: a question's own words dropped, everything else untouched (unit)."""

from __future__ import annotations

import pytest

from gateway.store.query_text import is_question, lexical_text


@pytest.mark.parametrize(
    ("asked", "ranked_by"),
    [
        ("how do I keep my password out of the config file?", "keep password out config file"),
        ("what happens if I try to save a new memory?", "try save new memory"),
        ("Can I run it inside Kubernetes", "run inside Kubernetes"),
        ("which error code means the engine is down?", "error code engine down"),
    ],
)
def test_a_question_keeps_only_its_content_words(asked: str, ranked_by: str) -> None:
    assert is_question(asked)
    assert lexical_text(asked) == ranked_by


@pytest.mark.parametrize(
    "text",
    [
        "Vitamin D deficiency is associated with multiple sclerosis.",  # a claim
        "qdrant on a server",  # keywords
        "the 5xx retries of the gateway",
        "",
    ],
)
def test_anything_but_a_question_reaches_the_engine_unchanged(text: str) -> None:
    assert not is_question(text)
    assert lexical_text(text) == text


def test_a_question_of_only_question_words_is_kept_as_asked() -> None:
    assert lexical_text("what is it?") == "what is it?"
    assert lexical_text("how?") == "how?"


def test_negations_and_apostrophes_survive() -> None:
    assert lexical_text("why doesn't recall return anything without a query?") == (
        "doesn't recall return without query"
    )
