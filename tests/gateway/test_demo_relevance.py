"""Relevance of the embedded demo: hit@1 and hit@3 over ``tests.support.demo_questions``.

Two question sets: ``DEMO_QUESTIONS`` (close to the corpus's words) and the newcomer
questions in people's own words, split into ``NEWCOMER_TRAIN`` (what the demo's search
was tuned on) and ``NEWCOMER_DEV`` (never tuned on), each with its own floor.

Runs memory/recall through the gateway (dispatcher, store, lexical encoder, Qdrant local
mode), exactly as a caller would. Parametrised by demo mode: a mode is a config factory in
``DEMO_MODES`` and a floor in ``FLOORS``, at the level measured when it was added, so a
change that loses relevance fails here. Print the figures with
``python -m tests.gateway.test_demo_relevance``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from gateway.config import GatewayConfig
from gateway.demo import DEMO_STORE, chunks, default_demo_config
from gateway.embedders.minilm import missing_message
from gateway.runtime import Gateway
from tests.support.demo_questions import DEMO_QUESTIONS, NEWCOMER_DEV, NEWCOMER_TRAIN

QUESTION_SETS: dict[str, list[tuple[str, str]]] = {
    "heading-like": DEMO_QUESTIONS,
    "newcomer-train": NEWCOMER_TRAIN,
    "newcomer-dev": NEWCOMER_DEV,
}

DEMO_MODES: dict[str, Callable[[], GatewayConfig]] = {
    "lexical": lambda: default_demo_config(hybrid=False),
    # The minilm extra is in the dev install, so CI measures the hybrid demo too.
    "hybrid": lambda: default_demo_config(hybrid=True),
}

FLOORS: dict[tuple[str, str], tuple[int, int]] = {
    ("lexical", "heading-like"): (25, 27),
    ("hybrid", "heading-like"): (24, 27),
    ("lexical", "newcomer-train"): (43, 48),
    ("hybrid", "newcomer-train"): (45, 48),
    ("lexical", "newcomer-dev"): (15, 21),
    ("hybrid", "newcomer-dev"): (17, 23),
}
"""(hit@1, hit@3) of each mode on each question set, as measured at the demo's defaults."""


@dataclass(frozen=True)
class Relevance:
    hit1: int
    hit3: int
    misses: list[tuple[str, str, list[str]]]
    """(question, expected key, the top 3 keys) of each question missed at 3."""


RELEVANCE_TIMEOUT_MS = 120_000
"""What is measured here is the ranking, not the speed: a loaded machine (the first query
loads the embedding model) must not turn a miss into an error."""


async def measure(
    cfg: GatewayConfig, questions: list[tuple[str, str]] = DEMO_QUESTIONS
) -> Relevance:
    store = cfg.stores[DEMO_STORE]
    cfg.stores[DEMO_STORE] = store.model_copy(update={"request_timeout_ms": RELEVANCE_TIMEOUT_MS})
    gateway = Gateway(cfg)
    await gateway.start()
    try:
        dispatcher = gateway.dispatcher(DEMO_STORE)
        hit1 = hit3 = 0
        misses = []
        for question, expected in questions:
            result = await dispatcher.dispatch("memory/recall", {"query": question, "limit": 3})
            keys = [r["key"] for r in result["records"]]
            hit1 += keys[:1] == [expected]
            hit3 += expected in keys
            if expected not in keys:
                misses.append((question, expected, keys))
    finally:
        await gateway.close()
    return Relevance(hit1, hit3, misses)


@pytest.mark.parametrize("name", sorted(QUESTION_SETS))
def test_every_question_names_a_chunk_of_the_corpus(name: str) -> None:
    questions = QUESTION_SETS[name]
    keys = {c.key for c in chunks()}
    assert len(questions) >= 20
    for question, expected in questions:
        assert expected in keys, question
    assert len({q for q, _ in questions}) == len(questions)


def test_the_newcomer_splits_are_disjoint_and_large_enough() -> None:
    assert len(NEWCOMER_TRAIN) + len(NEWCOMER_DEV) >= 60
    assert not {q for q, _ in NEWCOMER_TRAIN} & {q for q, _ in NEWCOMER_DEV}
    headings = {c.title.rsplit(": ", 1)[-1].lower() for c in chunks()}
    assert len(headings) > 20
    for question, _ in NEWCOMER_TRAIN + NEWCOMER_DEV:
        assert question.rstrip("?").lower() not in headings, question


@pytest.mark.integration
@pytest.mark.parametrize(("mode", "name"), sorted(FLOORS))
async def test_demo_relevance_holds_its_floor(mode: str, name: str) -> None:
    if mode == "hybrid" and missing_message("auto") is not None:
        pytest.skip("the minilm extra is not installed")
    got = await measure(DEMO_MODES[mode](), QUESTION_SETS[name])
    floor1, floor3 = FLOORS[(mode, name)]
    assert got.hit1 >= floor1, got.misses
    assert got.hit3 >= floor3, got.misses


def main() -> None:
    for mode, name in sorted(FLOORS):
        questions = QUESTION_SETS[name]
        got = asyncio.run(measure(DEMO_MODES[mode](), questions))
        n = len(questions)
        print(f"{mode} {name}: hit@1 {got.hit1}/{n}  hit@3 {got.hit3}/{n}")
        for question, expected, keys in got.misses:
            print(f"  missed at 3: {question!r} -> {expected}; got {keys}")


if __name__ == "__main__":
    main()
