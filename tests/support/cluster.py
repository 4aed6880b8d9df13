"""A local 3-node cluster of tests/engines/engines.py (``cluster``), for failover tests and benches.

Each member is one JVM; ``fault`` kills, pauses (SIGSTOP: the node hangs), resumes or
restarts one of them. The cluster uses the same engines home as the suite's nodes
(``A2M_ENGINES_HOME``), so the downloaded distribution is shared, and its own ports and
data directories, so the suite's nodes are never touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

ENGINES_PY = Path(__file__).resolve().parents[1] / "engines" / "engines.py"
Fault = Literal["kill", "pause", "resume", "restart"]


@dataclass(frozen=True)
class Cluster:
    engine: str
    """The engines.py line: opensearch3 or elasticsearch9."""
    members: dict[str, str]
    """Member name (``opensearch3-c1``...) to its HTTP URL, in member order."""

    @property
    def urls(self) -> list[str]:
        return list(self.members.values())


def engines(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ENGINES_PY), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start(engine: str) -> Cluster:
    """Start the cluster (or find it running) and wait until every member has joined.

    Raises:
        RuntimeError: it did not start; the message ends with engines.py's stderr.
    """
    started = engines("cluster", "start", "--engine", engine)
    if started.returncode != 0:
        raise RuntimeError(f"the {engine} cluster did not start:\n{started.stderr[-3000:]}")
    return running(engine)


def running(engine: str) -> Cluster:
    out = engines("cluster", "state", "--engine", engine, timeout=60)
    state: dict[str, Any] = json.loads(out.stdout or "{}")
    if not state:
        raise RuntimeError(f"no {engine} cluster is running: {out.stderr[-2000:]}")
    return Cluster(engine, {name: str(state[name]["url"]) for name in sorted(state)})


def stop(engine: str) -> None:
    engines("cluster", "stop", "--engine", engine, timeout=120)


def fault(action: Fault, member: str) -> None:
    """Apply one fault to one member (restart waits until it has rejoined).

    Raises:
        RuntimeError: engines.py failed.
    """
    done = engines("cluster", action, member)
    if done.returncode != 0:
        raise RuntimeError(f"cluster {action} {member}: {done.stderr[-2000:]}")


def replicate(url: str, index: str, replicas: int = 1, timeout_s: float = 600.0) -> None:
    """Give ``index`` ``replicas`` replicas and wait until every copy is assigned (green).

    Raises:
        RuntimeError: the index did not turn green in time.
    """
    with httpx.Client(base_url=url, timeout=timeout_s + 10) as client:
        # Flushed first, a replica copies segment files instead of replaying (re-indexing,
        # HNSW graphs included) every operation of the translog: minutes on a busy machine.
        client.post(f"/{index}/_flush").raise_for_status()
        client.put(
            f"/{index}/_settings", json={"index": {"number_of_replicas": replicas}}
        ).raise_for_status()
        health = client.get(
            f"/_cluster/health/{index}",
            params={"wait_for_status": "green", "timeout": f"{int(timeout_s)}s"},
        ).json()
    if health.get("status") != "green":
        raise RuntimeError(f"{index} is not green after {timeout_s:.0f} s: {health}")


def node_names(url: str) -> dict[str, str]:
    """Node id to node name, as the node at ``url`` sees the cluster."""
    nodes: Mapping[str, Any] = httpx.get(f"{url}/_nodes/_all/none", timeout=30).json()["nodes"]
    return {node_id: str(info["name"]) for node_id, info in nodes.items()}


def manager(url: str) -> str:
    """The name of the elected cluster manager (master), as the node at ``url`` sees it."""
    rows = httpx.get(f"{url}/_cat/nodes", params={"h": "name,m", "format": "json"}, timeout=30)
    for row in rows.json():
        if row.get("m") == "*":
            return str(row["name"])
    raise RuntimeError("no elected cluster manager")


def http_connections_opened(url: str, member: str) -> int:
    """How many HTTP connections ``member`` has accepted since it started (asked of ``url``).

    Only the gateway opens HTTP connections to a member once it runs, so this rising
    after a restart means the gateway sends it requests again.
    """
    nodes = httpx.get(f"{url}/_nodes/{member}/stats/http", timeout=30).json()["nodes"]
    return sum(int(n["http"]["total_opened"]) for n in nodes.values())


def wait_nodes(url: str, count: int, timeout_s: float = 120.0) -> bool:
    """True once the node at ``url`` sees ``count`` nodes in its cluster."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            health = httpx.get(f"{url}/_cluster/health", timeout=10).json()
            if int(health.get("number_of_nodes", 0)) == count:
                return True
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    return False
