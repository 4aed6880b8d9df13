"""Is one setting's nDCG@10 different from another's, or within the noise of 809 queries?

Two reports of ``python -m bench.quality ... --out FILE`` on the same queries; for
each engine and mode in both, the mean paired difference per query (B - A) and
its 95 % interval by a paired bootstrap (10,000 resamples of the queries, seeded):
an interval that holds 0 means the two settings rank equally well on this split.

    python -m bench.quality.compare A.json B.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESAMPLES = 10_000


def bootstrap(diffs: Sequence[float], seed: int = 7) -> tuple[float, float]:
    """95 % interval of the mean of ``diffs`` (paired bootstrap)."""
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(RESAMPLES))
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def _cells(path: Path) -> tuple[dict[tuple[str, str], dict[str, float]], dict[str, Any]]:
    report = json.loads(path.read_text())
    cells = {(c["engine"], c["mode"]): c["ndcg10_by_query"] for c in report["cells"]}
    return cells, report.get("tuning", {})


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quality.compare", description=__doc__)
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    args = p.parse_args(argv)
    a, tune_a = _cells(args.a)
    b, tune_b = _cells(args.b)
    print(f"A: {args.a} {tune_a}\nB: {args.b} {tune_b}\n")
    print("| engine | mode | queries | nDCG@10 A | nDCG@10 B | B - A | 95 % interval |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for key in sorted(a.keys() & b.keys()):
        qa, qb = a[key], b[key]
        if not qa or qa.keys() != qb.keys():
            print(f"| {key[0]} | {key[1]} | - | - | - | - | not the same queries |")
            continue
        diffs = [qb[q] - qa[q] for q in qa]
        low, high = bootstrap(diffs)
        print(
            f"| {key[0]} | {key[1]} | {len(diffs)} | {statistics.fmean(qa.values()):.4f} | "
            f"{statistics.fmean(qb.values()):.4f} | {statistics.fmean(diffs):+.4f} | "
            f"{low:+.4f} .. {high:+.4f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
