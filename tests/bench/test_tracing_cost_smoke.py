"""``python -m bench.tracing_cost`` still runs: a few calls per mode, spans reach the collector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.otlp import otlp_collector, span_names

REPO = Path(__file__).resolve().parents[2]


def test_tracing_cost_runs_and_exports() -> None:
    with otlp_collector() as (url, got):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.tracing_cost",
                "-n",
                "20",
                "--rounds",
                "1",
                "--warmup",
                "5",
                "--otlp-endpoint",
                url,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows[2:]] == ["off", "on", "on, 10 % sampled"]
    names = span_names(got)
    # 20 sampled calls, each a call span and its engine span, and some of the 10 % ones.
    assert names.count("memory/recall") >= 20
    assert names.count("search bench-tracing") == names.count("memory/recall")
