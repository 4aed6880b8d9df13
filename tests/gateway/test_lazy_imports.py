"""What `serve` imports: MCP, tracing, embedders and the demo only when the config uses them.

Each case runs the real serve path (``gateway.serve.serve_http``) in a fresh interpreter up
to the point where uvicorn would start listening, then lists the modules it has loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

NOT_FOR_AN_OPENSEARCH_STORE = (
    "mcp",
    "mcp_types",
    "opentelemetry",
    "onnxruntime",
    "tokenizers",
    "numpy",
    "jwt",
    "cryptography",
    "fastapi",
    "gateway.demo",
    "gateway.mcp",
    "gateway.observability.tracing",
    "gateway.embedders.minilm",
)
"""Top-level packages or gateway modules a lexical OpenSearch store without server.auth.jwt
never needs at start."""

_PROBE = """
import json, sys
import uvicorn

async def stop_before_listening(self, sockets=None):
    print(json.dumps(sorted(sys.modules)))

uvicorn.Server.serve = stop_before_listening
from gateway.serve import load, serve_http
raise SystemExit(serve_http(load(sys.argv[1] or None), "127.0.0.1", 0))
"""


def _loaded(config: Path | None, **env: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(config or "")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    modules: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return modules


def _matching(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def _opensearch_config(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.yaml"
    store = {
        "backend": "opensearch",
        "index": "docs",
        # Never contacted: the probe stops before the app's lifespan opens the store.
        "connection": {"hosts": ["http://127.0.0.1:9"]},
        "mapping": {"content": "text", "key": "key", "metadata": ["title"]},
        "search": {"mode": "lexical", "text_fields": ["title", "text"]},
    }
    path.write_text(yaml.safe_dump({"stores": {"docs": store}}))
    return path


def test_an_opensearch_config_loads_no_mcp_tracing_embedder_or_demo(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith("OTEL_")}
    modules = _loaded(_opensearch_config(tmp_path), **dict.fromkeys(env, ""))
    assert "gateway.transports.http" in modules
    assert "connectors.lucene.opensearch" in modules
    assert _matching(modules, NOT_FOR_AN_OPENSEARCH_STORE) == []


def test_the_probe_sees_what_a_config_does_use(tmp_path: Path) -> None:
    # The demo is the store the CLI serves without --config: its module is loaded then.
    assert _matching(_loaded(None), ("gateway.demo",)) != []
    # Tracing asked for by the environment loads the gateway's spans (the otel extra is a
    # dev dependency).
    traced = _loaded(_opensearch_config(tmp_path), OTEL_TRACES_EXPORTER="console")
    assert "gateway.observability.tracing" in traced
