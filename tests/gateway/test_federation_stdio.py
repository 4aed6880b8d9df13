"""`a2m-gateway stdio --store <federation>` serves a federation of two Qdrant stores."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
import yaml

from tests.conformance.conftest import gateway_command, gateway_env
from tests.security.support import SPARSE, write_qdrant

pytestmark = pytest.mark.integration


def _store(path: Path, collection: str) -> dict[str, object]:
    return {
        "backend": "qdrant",
        "index": collection,
        "connection": {"path": str(path)},
        "mapping": {"content": "text", "key": "key", "created_at": "created_at"},
        "search": {"mode": "lexical", "sparse_vector": SPARSE},
    }


def test_stdio_serves_a_federation(tmp_path: Path) -> None:
    for name, minute in (("left", 1), ("right", 2)):
        docs = [
            (
                i + 1,
                {
                    "text": f"{name} note {i} about harbour cranes",
                    "key": f"{name}/{i}",
                    "created_at": f"2026-01-0{i + 1}T00:0{minute}:00Z",
                },
            )
            for i in range(3)
        ]
        write_qdrant(tmp_path / name, name, docs, "text")
    config = {
        "stores": {n: _store(tmp_path / n, n) for n in ("left", "right")},
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
