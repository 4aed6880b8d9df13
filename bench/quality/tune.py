"""Tune the store's retrieval knobs on a training split (never on the split you report).

Runs the quality harness once per setting of one knob, on one engine and
mode, and prints nDCG@10 / R@100 per setting:

    python -m bench.quality.tune --engines opensearch --modes bm25 \\
        --knob text-fields --values "title,text" "title^2,text" "title^0.5,text"
    python -m bench.quality.tune --engines opensearch --modes hybrid \\
        --knob rrf-k --values 10 20 40 60 100

Any other harness flag (``--corpus``, ``--queries``, ``--qrels``, fixed
values of the other knobs) passes through. Refuses a queries file whose name
says "test" unless ``--i-know-this-is-not-train`` is given.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.quality.harness import parse_args, run

KNOBS = ("text-fields", "rrf-k", "candidates")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.quality.tune",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--knob", choices=KNOBS, required=True)
    p.add_argument("--values", nargs="+", required=True)
    p.add_argument("--i-know-this-is-not-train", action="store_true")
    args, rest = p.parse_known_args(argv)
    rows = []
    for value in args.values:
        h = parse_args([*rest, f"--{args.knob}", value])
        if "test" in Path(h.queries).name and not args.i_know_this_is_not_train:
            p.error(f"{h.queries} looks like a test split: tune on train only")
        report = run(h)
        for c in report.cells:
            rows.append((value, c.engine, c.mode, c.ndcg10, c.recall100, report.load_after))
            print(
                f"{args.knob}={value}: {c.engine} {c.mode} nDCG@10 {c.ndcg10:.4f}", file=sys.stderr
            )
    print(f"| {args.knob} | engine | mode | nDCG@10 | R@100 | load after |")
    print("| --- | --- | --- | ---: | ---: | --- |")
    for value, engine, mode, ndcg, r100, load in rows:
        print(f"| `{value}` | {engine} | {mode} | {ndcg:.4f} | {r100:.4f} | {load} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
