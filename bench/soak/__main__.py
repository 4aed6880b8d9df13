"""``python -m bench.soak``: see bench/soak/__init__.py and docs/benchmarks.md."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from bench import docs
from bench.soak.harness import parse_args, run
from bench.soak.report import markdown


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    table = markdown(report)
    print(table)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(report, indent=2) + "\n")
    if args.write_docs:
        head = (
            f"`{report['command']}` — {report['machine']}; load average "
            f"{report['load_before']} before, {report['load_after']} after; "
            f"{report['engines']} engines, concurrency {report['concurrency']}, "
            f"deadline {report['deadline_s']} s, {report['duration_s']} s.\n\n"
        )
        docs.replace_section(docs.BENCHMARKS_MD, "soak", head + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
