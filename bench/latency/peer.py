"""The peer: opensearch-mcp-server-py (PyPI), in its own virtualenv, over streamable HTTP.

It is started as ``opensearch-mcp-server-py --transport stream --port P``
with ``OPENSEARCH_URL`` pointing at the same node; its streamable-HTTP
endpoint is ``POST /mcp`` (stateless: no initialize handshake or session
id needed, each POST is one JSON-RPC call answered as a one-event SSE stream),
and ``GET /health`` says when it is up. Its search tool is ``SearchIndexTool``
(``index``, ``query_dsl``, ``size``), which runs ``POST /<index>/_search``
with the DSL as given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.process import spawn_until_ready

PACKAGE = "opensearch-mcp-server-py"
SEARCH_TOOL = "SearchIndexTool"
DEFAULT_VENV = Path.home() / ".cache" / "a2m-bench" / "peer-venv"
READY_TIMEOUT_S = 120.0


@dataclass
class PeerServer:
    proc: subprocess.Popen[bytes]
    base_url: str
    ready_after_s: float
    version: str


def ensure_venv(venv: Path) -> Path:
    """The peer's executable, installing the package into its own venv the first time.

    Raises:
        RuntimeError: the venv or the install failed.
    """
    exe = venv / "bin" / PACKAGE
    if exe.is_file():
        return exe
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", PACKAGE]
    if subprocess.run(pip, check=False).returncode != 0 or not exe.is_file():
        raise RuntimeError(f"could not install {PACKAGE} into {venv}")
    return exe


def peer_version(venv: Path) -> str:
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            f"import importlib.metadata as m; print(m.version({PACKAGE!r}))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def start_peer(venv: Path, opensearch_url: str, log_path: Path) -> PeerServer:
    """Start the peer against ``opensearch_url`` and wait for ``/health``.

    Raises:
        RuntimeError: it exited or was not up within READY_TIMEOUT_S.
    """
    exe = ensure_venv(venv)
    env = {
        **os.environ,
        "OPENSEARCH_URL": opensearch_url,
        "OPENSEARCH_NO_AUTH": "true",
        "OPENSEARCH_SSL_VERIFY": "false",
    }

    def command(port: int) -> list[str]:
        return [str(exe), "--transport", "stream", "--host", "127.0.0.1", "--port", str(port)]

    started = spawn_until_ready(
        command, env, log_path, health_path="/health", what="peer", timeout_s=READY_TIMEOUT_S
    )
    return PeerServer(started.proc, started.base_url, started.ready_after_s, peer_version(venv))


def tool_call(index: str, body: dict[str, Any], request_id: int) -> bytes:
    """The JSON-RPC ``tools/call`` of SearchIndexTool for one ``_search`` body."""
    dsl = {k: v for k, v in body.items() if k != "size"}
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {
                "name": SEARCH_TOOL,
                "arguments": {"index": index, "query_dsl": dsl, "size": body.get("size", 10)},
            },
        }
    )


def answer_ok(raw: bytes) -> bool:
    """True when an SSE (or JSON) answer carries a tool result that is not an error."""
    text = raw.decode("utf-8", "replace")
    payload = text
    if not text.lstrip().startswith("{"):
        lines = [ln[5:].strip() for ln in text.splitlines() if ln.startswith("data:")]
        if not lines:
            return False
        payload = lines[-1]
    try:
        msg = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    result = msg.get("result") if isinstance(msg, dict) else None
    return isinstance(result, dict) and not result.get("isError", False)
