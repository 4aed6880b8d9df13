"""Relevance of the embedded demo: hit@1 and hit@3 over ``tests.support.demo_questions``.

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

from gateway.app import Gateway
from gateway.config import GatewayConfig
from gateway.demo import DEMO_STORE, chunks, default_demo_config
from tests.support.demo_questions import DEMO_QUESTIONS

DEMO_MODES: dict[str, Callable[[], GatewayConfig]] = {
    "lexical": lambda: default_demo_config(hybrid=False),
    # The minilm extra is in the dev install, so CI measures the hybrid demo too.
    "hybrid": lambda: default_demo_config(hybrid=True),
}

FLOORS: dict[str, tuple[int, int]] = {"lexical": (19, 24), "hybrid": (20, 24)}
"""(hit@1, hit@3) out of len(DEMO_QUESTIONS), as measured for each mode."""


@dataclass(frozen=True)
class Relevance:
    hit1: int
    hit3: int
    misses: list[tuple[str, str, list[str]]]
    """(question, expected key, the top 3 keys) of each question missed at 3."""


async def measure(cfg: GatewayConfig) -> Relevance:
    gateway = Gateway(cfg)
    await gateway.start()
    try:
        dispatcher = gateway.dispatcher(DEMO_STORE)
        hit1 = hit3 = 0
        misses = []
        for question, expected in DEMO_QUESTIONS:
            result = await dispatcher.dispatch("memory/recall", {"query": question, "limit": 3})
            keys = [r["key"] for r in result["records"]]
            hit1 += keys[:1] == [expected]
            hit3 += expected in keys
            if expected not in keys:
                misses.append((question, expected, keys))
    finally:
        await gateway.close()
    return Relevance(hit1, hit3, misses)


def test_every_question_names_a_chunk_of_the_corpus() -> None:
    keys = {c.key for c in chunks()}
    assert len(DEMO_QUESTIONS) >= 20
    for question, expected in DEMO_QUESTIONS:
        assert expected in keys, question
    assert len({q for q, _ in DEMO_QUESTIONS}) == len(DEMO_QUESTIONS)


@pytest.mark.integration
@pytest.mark.parametrize("mode", sorted(DEMO_MODES))
async def test_demo_relevance_holds_its_floor(mode: str) -> None:
    got = await measure(DEMO_MODES[mode]())
    floor1, floor3 = FLOORS[mode]
    assert got.hit1 >= floor1, got.misses
    assert got.hit3 >= floor3, got.misses


def main() -> None:
    for mode, factory in sorted(DEMO_MODES.items()):
        got = asyncio.run(measure(factory()))
        n = len(DEMO_QUESTIONS)
        print(f"{mode}: hit@1 {got.hit1}/{n}  hit@3 {got.hit3}/{n}")
        for question, expected, keys in got.misses:
            print(f"  missed at 3: {question!r} -> {expected}; got {keys}")


if __name__ == "__main__":
    main()
