"""``python -m bench.where_refill`` still runs on a real engine, and its reads stop at the bound.

The checks are on what it prints: a row per bound and `where`, the searches each
recall made (counted by the store's engine observer), never the timings.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600
"""A hang guard, not a speed check."""

pytestmark = [pytest.mark.integration, pytest.mark.elasticsearch]


def test_the_refill_stops_at_each_bound(elasticsearch_url: str, scifact_dir: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.where_refill",
            "--engine",
            "elasticsearch",
            "--url",
            elasticsearch_url,
            "--bounds",
            "40",
            "160",
            "--where",
            "the",
            "--rounds",
            "1",
            "--data",
            str(scifact_dir),
        ],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in done.stdout.splitlines()
        if line.startswith("| ") and not line.startswith(("| bound", "| ---"))
    ]
    searches = {(r[0], r[1]): r[3] for r in rows}
    assert searches == {
        ("40", "`none`"): "1",
        ("40", '`{"content": "the"}`'): "2",  # pages of 10 and 40
        ("160", "`none`"): "1",
        ("160", '`{"content": "the"}`'): "3",  # 10, 40 and 160
    }
    assert all(float(r[4]) > 0 and float(r[5]) > 0 for r in rows)
