"""JSON over HTTP to a node, and what an OpenSearch or Elasticsearch node says about itself."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from tests.engines.manager.nodes import HOST, EngineError


def http(
    method: str, url: str, body: Any = None, ndjson: str | None = None, timeout: float = 30.0
) -> Any:
    data: bytes | None = None
    headers: dict[str, str] = {}
    if ndjson is not None:
        data, headers["Content-Type"] = ndjson.encode(), "application/x-ndjson"
    elif body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise EngineError(f"{method} {url} -> HTTP {exc.code}: {detail}") from exc


def healthy(port: int) -> bool:
    url = f"http://{HOST}:{port}/_cluster/health?wait_for_status=yellow&timeout=1s"
    try:
        health = http("GET", url, timeout=5)
    except (OSError, EngineError, ValueError):
        return False
    return bool(health.get("status") in ("yellow", "green") and not health.get("timed_out"))


def node_pid(port: int) -> int | None:
    """The process id of the node answering on `port` (None if it does not say)."""
    try:
        nodes = http("GET", f"http://{HOST}:{port}/_nodes/_local/process", timeout=10)["nodes"]
        return int(next(iter(nodes.values()))["process"]["id"])
    except (OSError, EngineError, ValueError, KeyError, StopIteration, TypeError):
        return None


def node_version(port: int) -> str:
    # `GET /` is not served by the Elasticsearch integ-test-zip (no rest-root module); this is.
    nodes = http("GET", f"http://{HOST}:{port}/_nodes/_local", timeout=10)["nodes"]
    return str(next(iter(nodes.values()))["version"])
