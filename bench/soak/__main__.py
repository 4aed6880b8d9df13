"""``python -m bench.soak``: see bench/soak/__init__.py and docs/benchmarks.md."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
        docs.replace_section(docs.BENCHMARKS_MD, "soak", docs_section(report))
    return 0


def docs_section(report: Mapping[str, Any]) -> str:
    """The run's conditions, then its table, for docs/benchmarks.md."""
    return (
        f"`{report['command']}` — {report['machine']}; load average (1/5/15 min) "
        f"{report['load_before']} before, {report['load_after']} after; "
        f"{report['engines']} engines, concurrency {report['concurrency']}, "
        f"deadline {report['deadline_s']} s, {report['duration_s']} s; gateway CPU "
        f"{report['gateway_cpu_ms_per_request']} ms per call (/proc), "
        f"{report['gateway_log_tracebacks']} tracebacks in its log.\n\n" + markdown(report)
    )


if __name__ == "__main__":
    sys.exit(main())
