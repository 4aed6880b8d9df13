"""The Qdrant server: a binary the user names (never fetched, never kept here), its config
with API keys and JWT RBAC, its readiness and its REST API.

No package registry ships a Qdrant server, so this node starts only where
``A2M_QDRANT_BIN`` names one (for example the ``/qdrant/qdrant`` of Qdrant's official
container image, copied out); ``start --all`` passes over it otherwise.
"""

from __future__ import annotations

import json
import os
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.engines.manager.fetch import fresh_dir
from tests.engines.manager.launching import Launch, spawn
from tests.engines.manager.nodes import HOST, EngineError, Node
from tests.engines.manager.procs import port_free
from tests.engines.manager.state import log_dir, run_dir

QDRANT_BIN_VAR = "A2M_QDRANT_BIN"
"""The variable that names a Qdrant server binary; without it there is no Qdrant node."""
QDRANT_ENV = {
    "grpc_port": "A2M_TEST_QDRANT_GRPC_PORT",
    "api_key": "A2M_TEST_QDRANT_API_KEY",
    "read_only_api_key": "A2M_TEST_QDRANT_READ_ONLY_API_KEY",
}
"""What the suite reads besides A2M_TEST_QDRANT_URL (state key -> variable)."""


def qdrant_named() -> bool:
    """True when the environment names a Qdrant server binary to start."""
    return bool(os.environ.get(QDRANT_BIN_VAR))


def qdrant_binary() -> Path:
    """The server binary that ``A2M_QDRANT_BIN`` names; never downloaded: no registry ships it.

    Raises:
        EngineError: the variable is unset, or names no executable file.
    """
    env = os.environ.get(QDRANT_BIN_VAR)
    if not env:
        raise EngineError(
            f"no Qdrant server binary: set {QDRANT_BIN_VAR} to one (docs/engines.md, "
            '"A Qdrant server"); no registry ships it'
        )
    path = Path(env)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise EngineError(f"{QDRANT_BIN_VAR}={path} is not an executable file")
    return path


def fetch_qdrant(version: str) -> Path:
    """Nothing to fetch: the binary must be there (a missing one fails `start`)."""
    return qdrant_binary()


def qdrant_config(base: Path, settings: dict[str, Any]) -> str:
    """The server's config file: loopback, our ports and dirs, API keys, JWT RBAC on."""
    return (
        "log_level: INFO\n"
        "telemetry_disabled: true\n"
        "storage:\n"
        f"  storage_path: {base / 'storage'}\n"
        f"  snapshots_path: {base / 'snapshots'}\n"
        "service:\n"
        f"  host: {HOST}\n"
        f"  http_port: {settings['port']}\n"
        f"  grpc_port: {settings['grpc_port']}\n"
        f"  api_key: {json.dumps(settings['api_key'])}\n"
        f"  read_only_api_key: {json.dumps(settings['read_only_api_key'])}\n"
        # Access tokens (JWT, HS256 signed with api_key) limit a client to read or one collection.
        "  jwt_rbac: true\n"
    )


def qdrant_settings(base: Path, port: int, fresh: bool) -> dict[str, Any]:
    """Ports and keys: new on a fresh start, the previous ones on a restart (same data)."""
    saved = base / "settings.json"
    if not fresh and saved.exists():
        settings: dict[str, Any] = json.loads(saved.read_text())
        return settings
    grpc_port = next(p for p in range(port + 1, port + 100) if port_free(p))
    settings = {
        "port": port,
        "grpc_port": grpc_port,
        "api_key": secrets.token_urlsafe(24),
        "read_only_api_key": secrets.token_urlsafe(24),
    }
    saved.write_text(json.dumps(settings))
    saved.chmod(0o600)
    return settings


def launch_qdrant(node: Node, port: int, fresh: bool) -> Launch:
    binary = qdrant_binary()
    base = run_dir(node.name)
    if fresh:
        fresh_dir(base)
    settings = qdrant_settings(base, port, fresh)
    config = base / "config.yaml"
    config.write_text(qdrant_config(base, settings))
    config.chmod(0o600)
    # The server reads QDRANT__* variables over its config file: none of ours leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("QDRANT")}
    out = log_dir() / f"{node.name}.out"
    cmd = [str(binary), "--config-path", str(config), "--disable-telemetry"]
    proc = spawn(cmd, base, out, fresh, env=env)
    extra = {k: settings[k] for k in QDRANT_ENV}
    return Launch(node.name, port, proc, out, pid=proc.pid, extra=extra)


def qdrant_ready(port: int) -> bool:
    """GET /readyz answers 200 (it needs no API key)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=5) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def qdrant_request(entry: dict[str, Any], method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"api-key": str(entry["api_key"]), "Content-Type": "application/json"}
    req = urllib.request.Request(f"{entry['url']}{path}", data, headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise EngineError(f"{method} {path} -> HTTP {exc.code}: {detail}") from exc


def print_qdrant_env(entry: dict[str, Any]) -> None:
    for key, var in QDRANT_ENV.items():
        print(f"export {var}={entry[key]}")
