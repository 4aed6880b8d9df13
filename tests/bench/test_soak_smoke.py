"""The fault soak (``python -m bench.soak``) runs end to end in seconds: one short phase of
each fault against a proxy in front of the shared OpenSearch node.

The node itself is never touched: ``--node`` makes the kill phase take the proxy
down instead. The checks are the soak's invariants, not its figures: no call
hangs, every error is canonical with ``data.retryable`` right and names no host,
each fault really reached the gateway (the proxy counted what it injected), and
the store answered again after every fault.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.soak.faults import FAULTS

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120
# What the proxy counts while each fault is on (the kill phase: nothing reaches it).
INJECTED = {
    "slow": "slowed",
    "429-retry-after": "status_429",
    "429": "status_429",
    "503-retry-after": "status_503",
    "503": "status_503",
    "drop": "dropped",
}


@pytest.mark.integration
@pytest.mark.opensearch
def test_soak_harness_survives_each_fault_once(
    tmp_path: Path, scifact_dir: Path, opensearch_url: str
) -> None:
    out = tmp_path / "soak.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.soak",
            "--node",
            f"opensearch={opensearch_url}",
            # The connector tests' index: same loader, same documents, loaded once per machine.
            "--index",
            "a2m-test-scifact",
            "--duration",
            "20",
            "--baseline-seconds",
            "1",
            "--fault-seconds",
            "1",
            "--healthy-seconds",
            "1",
            "--slow",
            "1",
            "--deadline",
            "3",
            "--concurrency",
            "4",
            "--json",
            str(out),
        ],
        cwd=REPO,
        env={**os.environ, "A2M_SCIFACT_DIR": str(scifact_dir)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())

    assert report["engines"].startswith("shared")
    assert report["requests"] > 0
    assert report["ok"] > 0
    assert report["hangs"] == 0
    assert report["wrong"] == {}, report["wrong"]
    assert report["leaks"] == 0
    assert report["gateway_log_tracebacks"] == 0

    faults = [p for p in report["phases"] if p["node"] is not None]
    assert [p["kind"] for p in faults] == list(FAULTS)
    starts = [p["start_s"] for p in report["phases"]]
    assert starts == sorted(starts)
    for phase in faults:
        counts = phase["proxy"]["opensearch"]
        if phase["kind"] == "kill":
            assert counts.get("forwarded", 0) == 0, phase
        else:
            assert counts.get(INJECTED[phase["kind"]], 0) > 0, phase
        assert phase["recovery_s"] is not None, phase  # the store answered again
    trouble = sum(
        n for p in faults for label, n in p["answers"].items() if label.startswith("-32603 ")
    )
    assert trouble > 0  # the faults reached the callers as engine trouble, not only retries

    names = {t["name"] for t in report["targets"]}
    assert names == {
        "hangs",
        "wrong errors",
        "leaks",
        "worst time to full service s",
        "most refused after a fault",
        "most breaker opens per fault",
        "worst first good answer s",
        "RSS growth",
    }
    assert report["rss_mib"]["start"] > 0
    assert report["rss_mib"]["end"] > 0
    assert "| target | goal | measured | pass |" in result.stdout
    assert "| 1 | kill opensearch |" in result.stdout
