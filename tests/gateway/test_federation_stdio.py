"""`a2m-gateway stdio --store <federation>` serves a federation of two Qdrant stores."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
import yaml

from tests.conformance.conftest import gateway_command, gateway_env
from tests.support.qdrant_pair import write_qdrant_pair

pytestmark = pytest.mark.integration


def test_stdio_serves_a_federation(tmp_path: Path) -> None:
    config = {
        "stores": write_qdrant_pair(tmp_path),
        "federations": {"both": {"members": ["left", "right"]}},
    }
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(yaml.safe_dump(config))
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "memory/describe"},
        {"jsonrpc": "2.0", "id": 2, "method": "memory/recall", "params": {"query": "cranes"}},
        {"jsonrpc": "2.0", "id": 3, "method": "memory/timeline", "params": {"limit": 4}},
        {"jsonrpc": "2.0", "id": 4, "method": "memory/fetch", "params": {"key": "right/2"}},
    ]
    proc = subprocess.run(
        [*gateway_command(), "stdio", "--config", str(cfg), "--store", "both"],
        input=b"".join(orjson.dumps(m) + b"\n" for m in lines),
        capture_output=True,
        env=gateway_env(tmp_path / "data"),
        timeout=120,
        check=True,
    )
    answers = {a["id"]: a["result"] for a in map(orjson.loads, proc.stdout.splitlines())}
    assert answers[1]["name"] == "both"
    assert [m["store"] for m in answers[1]["members"]] == ["left", "right"]
    recalled = [r["id"] for r in answers[2]["records"]]
    assert {i.split(":")[0] for i in recalled} == {"left", "right"}
    assert len(recalled) == 6
    stamps = [r["created_at"] for r in answers[3]["records"]]
    assert stamps == sorted(stamps)
    assert [r["id"] for r in answers[3]["records"]] == ["left:2", "right:2", "left:3", "right:3"]
    assert answers[4]["record"]["id"] == "right:3"
