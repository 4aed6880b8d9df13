"""An engine that lives only in the tests plugs in through the registry alone.

tests/support/memory_engine registers the ``memory`` backend; the gateway, started
with ``A2M_GATEWAY_ENGINES`` naming it, validates its stores, refuses another
engine's keys on them, opens them for ``check`` (describe and sample records
included), with no edit outside that package.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from connectors.registry import ENV_VAR, Engine, engine, make_connector, register_engine
from connectors.spec import ConnectorSpec

PLUGIN = "tests.support.memory_engine"
DOCS = [
    {"id": "a", "body": "gateways read engines", "ts": "2026-01-01T00:00:00Z"},
    {"id": "b", "body": "engines plug in", "ts": "2026-01-02T00:00:00Z"},
]
ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, connection: str = "{documents: docs.json}") -> Path:
    (tmp_path / "docs.json").write_text(json.dumps(DOCS))
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text(
        "stores:\n  notes:\n    backend: memory\n    index: notes\n"
        f"    connection: {connection}\n"
        "    mapping: {content: body, created_at: ts}\n"
    )
    return cfg


def _gateway(
    *args: str, plugin: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(ENV_VAR, None)
    if plugin:
        env[ENV_VAR] = PLUGIN
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        input=stdin,
        timeout=120,
        check=False,
    )


def test_registering_makes_the_factory_build_its_connector() -> None:
    import tests.support.memory_engine as memory
    from tests.support.memory_engine.spec import MemoryConnectionSpec

    assert engine("memory") is memory.MEMORY
    register_engine(memory.MEMORY)  # the same entry again: a module imported twice
    spec = ConnectorSpec("memory", "notes", MemoryConnectionSpec(documents="/nowhere.json"))
    assert type(make_connector(spec)).__name__ == "MemoryEngineConnector"
    other = Engine("memory", memory.MEMORY.connection, memory.MEMORY.connector)
    with pytest.raises(ValueError, match="registered already"):
        register_engine(other)


def test_check_opens_describes_and_samples_a_store_of_the_plugin(tmp_path: Path) -> None:
    proc = _gateway("check", "--config", str(_config(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["store"], out["backend"], out["ok"]) == ("notes", "memory", True)
    assert out["engine"].startswith("documents in ")
    assert out["describe"]["name"] == "notes"
    assert out["describe"]["search"]["mode"] == "lexical"
    assert {r["id"] for r in out["sample"]} == {"a", "b"}


def test_check_says_what_it_tried_in_the_engines_own_words(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "{documents: missing.json}")
    proc = _gateway("check", "--config", str(cfg))
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["tried"] == "opened document set 'notes' in process"
    assert "connection.documents" in out["error"]


def test_without_the_plugin_the_backend_is_unknown(tmp_path: Path) -> None:
    proc = _gateway("check", "--config", str(_config(tmp_path)), plugin=False)
    assert proc.returncode == 2
    assert "stores.notes.backend: must be one of elasticsearch, opensearch, qdrant" in proc.stderr


def test_config_validation_names_the_plugin_and_refuses_other_engines_keys(
    tmp_path: Path,
) -> None:
    foreign = _gateway("check", "--config", str(_config(tmp_path, "{documents: d, hosts: [h]}")))
    assert foreign.returncode == 2
    assert (
        "stores.notes.connection.hosts: does not apply to backend memory "
        "(a key of elasticsearch and opensearch stores)"
    ) in foreign.stderr
    (tmp_path / "bad.yaml").write_text("stores:\n  s: {backend: nope, index: i}\n")
    unknown = _gateway("check", "--config", str(tmp_path / "bad.yaml"))
    assert "must be one of elasticsearch, opensearch, qdrant, memory" in unknown.stderr


_ON_MEMORY = re.compile(r"[\[-]memory[\]-]")
"""A test id whose backend parameter is the memory engine's."""


def _collected(plugin: bool) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if plugin:
        env[ENV_VAR] = PLUGIN
    modules = ["tests/conformance/test_timeline.py", "tests/conformance/test_embeddings.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *modules],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_the_conformance_suite_runs_on_the_plugins_backends() -> None:
    with_plugin, without = _collected(plugin=True), _collected(plugin=False)
    on_memory = [i for i in with_plugin if _ON_MEMORY.search(i)]
    assert any("test_timeline.py" in i for i in on_memory), with_plugin[:5]
    assert any("test_embeddings.py" in i for i in on_memory)  # collected; skipped: no vectors
    assert not [i for i in without if _ON_MEMORY.search(i)]
    assert len(with_plugin) - len(on_memory) == len(without)
