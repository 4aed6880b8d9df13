"""``python -m bench.passage_cpu`` still runs, in process and against gateway processes.

A few queries on qdrant-edge (local mode), the long-document stores with passages and
without; the checks are on what it prints (a row per store and tree, positive figures)
and the profiles it writes, never on the figures themselves.
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


def _run(scifact: Path, *args: str) -> list[list[str]]:
    """The rows of the first table the bench prints."""
    return _tables(scifact, *args)[0]


def _tables(scifact: Path, *args: str) -> list[list[list[str]]]:
    """The rows of each table the bench prints (its header and rule left out)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.passage_cpu",
            "--engines",
            "qdrant",
            "--shape",
            "whole",
            "long",
            "--limit-queries",
            "4",
            "--rounds",
            "2",
            "--warm-up",
            "1",
            *args,
        ],
        cwd=REPO,
        env={**os.environ, "A2M_SCIFACT_DIR": str(scifact)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tables: list[list[list[str]]] = []
    for line in done.stdout.splitlines():
        if not line.startswith("| "):
            continue
        if line.startswith("| store |"):
            tables.append([])
        elif not line.startswith("| ---"):
            tables[-1].append([cell.strip() for cell in line.split("|")[1:-1]])
    return tables


@pytest.mark.integration
def test_in_process_it_measures_and_profiles_each_store(tmp_path: Path, scifact_dir: Path) -> None:
    rows = _run(scifact_dir, "--profile", str(tmp_path))
    assert [r[0] for r in rows] == [
        "qdrant-whole-none",
        "qdrant-long-passages",
        "qdrant-long-passages-no-rank",
    ]
    assert all(float(r[1]) > 0 for r in rows)
    assert rows[0][3] == "1.00x (1.00-1.00)"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "qdrant-long-passages-no-rank.prof",
        "qdrant-long-passages.prof",
        "qdrant-whole-none.prof",
    ]


@pytest.mark.integration
def test_served_it_alternates_two_gateway_trees(scifact_dir: Path) -> None:
    rows = _run(scifact_dir, "--server", "--root", str(REPO))
    names = [r[0] for r in rows]
    assert names == [
        "this qdrant-whole-none",
        "this qdrant-long-passages",
        "this qdrant-long-passages-no-rank",
        "before qdrant-whole-none",
        "before qdrant-long-passages",
        "before qdrant-long-passages-no-rank",
    ]
    assert all(float(r[1]) >= 0 for r in rows)  # a 10 ms /proc tick can round to zero


@pytest.mark.integration
def test_it_adds_the_cpu_of_the_engine_process_it_is_given(scifact_dir: Path) -> None:
    # qdrant-edge runs inside the gateway: a busy process stands in for an engine's, so
    # what is read is the named process's CPU, never the gateway's. Two clients at once.
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        tables = _tables(scifact_dir, "--engine-pid", f"qdrant={busy.pid}", "--concurrency", "2")
    finally:
        busy.kill()
        busy.wait()
    assert len(tables) == 2
    gateway, engine = tables
    assert [r[0] for r in engine] == [r[0] for r in gateway]
    assert all(float(r[1]) > 0 for r in engine)
    assert engine[0][3] == "1.00x (1.00-1.00)"
