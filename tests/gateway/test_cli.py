"""The console script: `check` is the onboarding preview, bad configs fail with the field named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "A2M_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        # With the minilm extra the demo's first start embeds its corpus: minutes of wall
        # time when the CI machine is shared, seconds otherwise.
        timeout=600,
        env=env,
        check=False,
    )


@pytest.mark.integration
def test_check_previews_the_demo_store(tmp_path: Path) -> None:
    proc = run(["check"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is True
    assert out["describe"]["protocol"] == "a2m/0.1"
    assert len(out["sample"]) == 3
    for record in out["sample"]:
        assert record["content"]
        assert record["uri"]
        assert record["key"].startswith("demo/")


def test_invalid_config_names_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: elasticsearch\n    index: d\n"
        "    connection: {hosts: ['http://127.0.0.1:9'], api_key: '${NOT_SET_FOR_TEST}'}\n"
        "    mapping: {content: body}\n    search: {text_fields: [body]}\n"
    )
    proc = run(["check", "--config", str(cfg)], tmp_path)
    assert proc.returncode == 2
    assert "stores.docs.connection.api_key" in proc.stderr
    assert "NOT_SET_FOR_TEST" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_reports_an_unreachable_engine_without_the_host(tmp_path: Path) -> None:
    cfg = tmp_path / "down.yaml"
    cfg.write_text(
        "stores:\n  docs:\n    backend: qdrant\n    index: c\n"
        "    connection: {url: 'http://127.0.0.1:9', timeout_ms: 500, retries: 0}\n"
        "    mapping: {content: body}\n    search: {mode: lexical, sparse_vector: s}\n"
    )
    proc = run(["check", "--config", str(cfg)], tmp_path)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["ok"] is False
    assert "127.0.0.1" not in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
