"""``python -m bench.mcp_cost`` still runs: both ways answer the same records, it profiles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARGS = ("-n", "20", "--rounds", "1", "--warmup", "5", "--profile")


def test_mcp_cost_runs_both_ways_and_profiles(scifact_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.mcp_cost", *ARGS, "--scifact", str(scifact_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows[2:]] == ["a2m", "mcp"]
    for row in rows[2:]:
        assert float(row.split("|")[2]) > 0, row
    assert "The MCP door's own work" in done.stdout
    assert "gateway/mcp" in done.stdout  # the tool's own code shows in the profile
