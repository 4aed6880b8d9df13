"""The benchmark harnesses still run end to end (docs/benchmarks.md): a few queries, one engine.

They run as a user runs them (``python -m bench.quality`` / ``python -m
bench.latency``, each starting a real ``a2m-gateway serve``), and the checks
are on the shape of what they produce, not on the figures: every cell present,
numbers in range, no failed call, the markdown tables' rows there. The full
runs stay out of CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# A hang guard, not a speed check: a loaded CI machine starts the several gateways slowly.
TIMEOUT_S = 600


def _run(args: list[str], out: Path, scifact: Path, **env: str) -> tuple[dict[str, Any], str]:
    result = subprocess.run(
        [sys.executable, "-m", *args, "--out", str(out)],
        cwd=REPO,
        env={**os.environ, "A2M_SCIFACT_DIR": str(scifact), **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text()), result.stdout


@pytest.mark.integration
def test_quality_harness_on_qdrant(tmp_path: Path, scifact_dir: Path) -> None:
    report, table = _run(
        [
            "bench.quality",
            "--engines",
            "qdrant",
            "--limit-queries",
            "5",
            "--sample-docs",
            "60",
        ],
        tmp_path / "quality.json",
        scifact_dir,
    )
    cells = {(c["engine"], c["mode"]): c for c in report["cells"]}
    assert set(cells) == {("qdrant", m) for m in ("bm25", "dense", "hybrid")}
    for cell in cells.values():
        assert cell["queries"] == 5
        assert cell["errors"] == 0
        assert 0.0 <= cell["ndcg10"] <= 1.0
        assert 0.0 <= cell["recall100"] <= 1.0
        assert cell["p50_ms"] > 0
    # Every relevant document of these 5 queries is among ~70 loaded: R@100 must be 1
    # for at least one mode, or the harness lost documents on the way.
    assert max(c["recall100"] for c in cells.values()) == 1.0
    rows = [ln for ln in table.splitlines() if ln.startswith("| qdrant |")]
    assert len(rows) == 3
    assert "0.721" in table  # the README's train reference beside the hybrid row


@pytest.mark.integration
@pytest.mark.opensearch
def test_quality_harness_builds_the_opensearch_index_stemmed(
    tmp_path: Path, scifact_dir: Path, opensearch_url: str
) -> None:
    import httpx

    index = "a2m-test-bench-smoke"
    report, table = _run(
        [
            "bench.quality",
            "--engines",
            "opensearch",
            "--limit-queries",
            "5",
            "--sample-docs",
            "60",
            "--index",
            index,
            "--opensearch-url",
            opensearch_url,
        ],
        tmp_path / "quality.json",
        scifact_dir,
    )
    version = next(iter(httpx.get(f"{opensearch_url}/_nodes/_local").json()["nodes"].values()))
    assert [c["mode"] for c in report["cells"]] == ["bm25", "dense", "hybrid"]
    for cell in report["cells"]:
        assert (cell["analyzer"], cell["version"]) == ("english", version["version"])
        assert cell["errors"] == 0
    assert f"| opensearch | {version['version']} | english | bm25 |" in table
    # The analyzer is in the index name and in its mapping; "running" stems to "run".
    mapping = httpx.get(f"{opensearch_url}/{index}-english/_mapping").json()
    assert mapping[f"{index}-english"]["mappings"]["properties"]["text"]["analyzer"] == "english"
    tokens = httpx.post(
        f"{opensearch_url}/{index}-english/_analyze", json={"field": "text", "text": "running"}
    ).json()["tokens"]
    assert [t["token"] for t in tokens] == ["run"]
    httpx.delete(f"{opensearch_url}/{index}-english")


@pytest.mark.integration
@pytest.mark.opensearch
def test_latency_harness_direct_gateway_mcp_and_the_floors(
    tmp_path: Path, scifact_dir: Path, opensearch_url: str
) -> None:
    ways = ("direct", "gateway", "mcp", "floor", "floor-gateway-http", "floor-raw", "floor-none")
    report, table = _run(
        [
            "bench.latency",
            "--ways",
            *ways,
            "--requests",
            "12",
            "--warmup",
            "2",
            "--rounds",
            "1",
            "--concurrency",
            "1",
            "4",
            # The connector tests' index: same loader, same documents, loaded once per machine.
            "--index",
            "a2m-test-scifact",
            "--opensearch-url",
            opensearch_url,
        ],
        tmp_path / "latency.json",
        scifact_dir,
    )
    blocks = {(b["way"], b["concurrency"]): b for b in report["blocks"]}
    assert set(blocks) == {(w, c) for w in ways for c in (1, 4)}
    for block in blocks.values():
        assert block["errors"] == 0
        assert len(block["latencies_s"]) == 12
        assert all(0 < x < 30 for x in block["latencies_s"])
        assert block["wall_s"] > 0
    assert report["gateway_ready_s"] > 0
    # The gateway's kernel share of its CPU is measured beside the total, never above it.
    cpu = blocks[("gateway", 4)]["cpu_ms"]
    assert 0 <= cpu["gateway-sys"] <= cpu["gateway"]
    assert "| gateway | 4 |" in table
    assert "| gateway / direct | 1 |" in table
    assert "| mcp | 4 |" in table
    assert "| mcp / gateway | 4 |" in table
    # Each floor is its own server process, measured on its own (a few calls may cost
    # less than one 10 ms /proc tick: zero is a measurement, a missing key is not).
    for floor in ("floor", "floor-gateway-http", "floor-raw", "floor-none"):
        assert blocks[(floor, 4)]["cpu_ms"][floor] >= 0
        assert f"| {floor} | 4 |" in table
    for pair in ("gateway / floor", "gateway / floor-gateway-http", "mcp / gateway"):
        assert f"| {pair} | 4 |" in table.split("CPU per request, ratios")[1]


@pytest.mark.integration
@pytest.mark.elasticsearch
@pytest.mark.opensearch
def test_federated_quality_harness_on_three_engines(
    tmp_path: Path, scifact_dir: Path, elasticsearch_url: str, opensearch_url: str
) -> None:
    report, table = _run(
        [
            "bench.quality.federated",
            "--limit-queries",
            "5",
            "--sample-docs",
            "60",
            "--modes",
            "bm25",
            "hybrid",
            "--elasticsearch-url",
            elasticsearch_url,
            "--opensearch-url",
            opensearch_url,
        ],
        tmp_path / "federated.json",
        scifact_dir,
    )
    rows = {(r["store"], r["mode"]): r for r in report["rows"]}
    stores = {"federated", "es", "os", "qd", "whole-elasticsearch", "whole-opensearch"}
    assert set(rows) == {(s, m) for s in stores for m in ("bm25", "hybrid")}
    for row in rows.values():
        assert row["errors"] == 0
        assert 0.0 <= row["ndcg10"] <= 1.0
        assert 0.0 <= row["recall100"] <= 1.0
        assert 0.0 < row["p50_ms"] <= row["p99_ms"]
    # The shards are disjoint and together the whole corpus: each holds some of it.
    assert all(f"{s} (" in report["note"] for s in ("es", "os", "qd"))
    for mode in ("bm25", "hybrid"):
        assert rows[("federated", mode)]["ndcg10"] > 0.0
        assert f"| {mode} | federated vs slowest member" in table


@pytest.mark.integration
def test_loop_block_harness_on_the_demo() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.loop_block", "--seconds", "2", "--concurrency", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=4 * TIMEOUT_S,  # a fresh data directory: the demo is indexed at start
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split(" | ")[0] for line in result.stdout.splitlines() if line.startswith("| ")}
    assert rows >= {
        "| /healthz, idle",
        "| /healthz, under recall load",
        "| recall, short query",
        "| recall, 4,000-character query",
    }
    assert "errors: 0;" in result.stdout
    assert "loop " in result.stdout.split("by thread")[1]


@pytest.mark.integration
@pytest.mark.opensearch
def test_door_pair_interleaves_both_doors_of_two_gateways(
    tmp_path: Path, scifact_dir: Path, opensearch_url: str
) -> None:
    args = ["--slices", "3", "--per-slice", "8", "--concurrency", "1", "3"]
    report, table = _run(
        [
            "bench.door_pair",
            *args,
            *("--index", "a2m-test-scifact", "--opensearch-url", opensearch_url),
            *("--root", str(REPO)),  # a second gateway, from a checkout given by path
        ],
        tmp_path / "pair.json",
        scifact_dir,
    )
    rows = report["rows"]
    got = {(r["gateway"], r["concurrency"]) for r in rows}
    assert got == {(g, c) for g in ("this tree", f"root {REPO}") for c in (1, 3)}
    for row in rows:
        assert row["calls"] == {"a2m": [8, 8, 8], "mcp": [8, 8, 8]}
        assert all(cpu >= 0 for way in ("a2m", "mcp") for cpu in row["cpu_s"][way])
    assert f"| root {REPO} | 3 |" in table
    assert "| this tree | 1 |" in table


@pytest.mark.integration
@pytest.mark.opensearch
def test_door_pair_with_the_floor_and_direct_ways(
    tmp_path: Path, scifact_dir: Path, opensearch_url: str
) -> None:
    report, table = _run(
        [
            "bench.door_pair",
            *("--slices", "2", "--per-slice", "6", "--concurrency", "2", "--floor", "--direct"),
            *("--index", "a2m-test-scifact", "--opensearch-url", opensearch_url),
        ],
        tmp_path / "pair.json",
        scifact_dir,
    )
    (row,) = report["rows"]
    assert row["calls"] == {"a2m": [6, 6], "mcp": [6, 6]}
    assert row["floor"]["calls"] == [6, 6]
    assert all(cpu >= 0 for cpu in row["floor"]["cpu_s"])
    assert row["direct"]["cpu_s"] is None
    assert [len(s) for s in row["direct"]["latencies_s"]] == [6, 6]
    assert all(wall > 0 for wall in row["direct"]["wall_s"])
    mcp_row, gateway = (line for line in table.splitlines() if line.startswith("| this tree | 2 |"))
    assert len(mcp_row.split("|")) == 8  # the MCP / A2M table comes first, as without the ways
    (floor,) = (line for line in table.splitlines() if line.startswith("| floor | 2 |"))
    (direct,) = (line for line in table.splitlines() if line.startswith("| direct | 2 |"))
    g, f, d = ([c.strip() for c in row.strip("|").split("|")] for row in (gateway, floor, direct))
    assert "-" not in g  # every figure of the gateway's row was computed
    assert f[3] == "-"  # the floor is what the CPU ratio is against
    assert float(f[2]) >= 0
    assert d[2:] == ["-", "-", d[4], "-", "-"]
    assert float(d[4]) > 0  # the direct p50 in ms


@pytest.mark.integration
def test_qdrant_wire_cost_measures_both_checkouts_against_the_double() -> None:
    args = ["--calls", "20", "--rounds", "1", "--root", str(REPO)]
    result = subprocess.run(
        [sys.executable, "-m", "bench.qdrant_wire_cost", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rounds = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert len(rounds) == 2  # each checkout once
    medians = [line for line in result.stdout.splitlines() if line.startswith("median ")]
    assert [m.split()[1] for m in medians] == ["this", "--root"]
    for line in rounds + medians:
        ms = float(line.split("CPU ")[1].split(" ms")[0])
        assert 0 < ms < 1000
