"""Local 3-node clusters of one line (one JVM each, 512 MiB heaps, loopback, their own
data dirs): their ports, their members' configs and launches. Each member is a state entry
of its own (`opensearch3-c1` ...), so a fault acts on one JVM."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tests.engines.manager.fetch import fetch_elasticsearch, fetch_opensearch, fresh_dir
from tests.engines.manager.jdk import compile_launcher, java_home
from tests.engines.manager.launching import Launch, spawn
from tests.engines.manager.lucene import (
    elasticsearch_command,
    elasticsearch_env,
    opensearch_command,
    prepare_elasticsearch,
)
from tests.engines.manager.nodes import (
    ELASTICSEARCH9,
    HOST,
    NODES,
    OPENSEARCH,
    OPENSEARCH3,
    EngineError,
)
from tests.engines.manager.procs import port_free
from tests.engines.manager.rest import http
from tests.engines.manager.state import log_dir, run_dir

CLUSTER_SIZE = 3
CLUSTER_HEAP = ["-Xms512m", "-Xmx512m"]
CLUSTER_ENGINES = (OPENSEARCH3, ELASTICSEARCH9)
CLUSTER_BASE_PORT = {OPENSEARCH3: 20000, ELASTICSEARCH9: 20100}  # HTTP; transport is +50
CLUSTER_TRANSPORT_OFFSET = 50


@dataclass(frozen=True)
class Member:
    """One node of a local cluster: its line, its place, its ports and its peers."""

    engine: str  # the NODES entry whose distribution it runs (opensearch3 / elasticsearch9)
    index: int  # 1-based
    http_port: int
    transport_port: int
    peers: tuple[int, ...]  # every member's transport port (discovery.seed_hosts)

    @property
    def name(self) -> str:
        return cluster_member(self.engine, self.index)

    @property
    def cluster(self) -> str:
        return f"a2m-{self.engine}-cluster"

    def discovery_yml(self, manager_key: str) -> str:
        seeds = ", ".join(f'"{HOST}:{p}"' for p in self.peers)
        names = ", ".join(
            f'"{cluster_member(self.engine, i)}"' for i in range(1, len(self.peers) + 1)
        )
        return (
            f"cluster.name: {self.cluster}\n"
            f"node.name: {self.name}\n"
            f"network.host: {HOST}\n"
            f"http.port: {self.http_port}\n"
            f"transport.port: {self.transport_port}\n"
            f"discovery.seed_hosts: [{seeds}]\n"
            # Read only when the cluster forms for the first time (empty data dirs).
            f"{manager_key}: [{names}]\n"
            "cluster.routing.allocation.disk.threshold_enabled: false\n"
        )


def cluster_member(engine: str, index: int) -> str:
    return f"{engine}-c{index}"


def cluster_members(state: dict[str, dict[str, Any]], engine: str) -> list[str]:
    return sorted(n for n, e in state.items() if e.get("cluster_engine") == engine)


def plan_cluster(engine: str, size: int = CLUSTER_SIZE) -> list[Member]:
    """Free HTTP and transport ports for every member, from the line's cluster range."""
    base = CLUSTER_BASE_PORT[engine]
    http_ports = [p for p in range(base, base + CLUSTER_TRANSPORT_OFFSET) if port_free(p)][:size]
    transport = [
        p
        for p in range(base + CLUSTER_TRANSPORT_OFFSET, base + 2 * CLUSTER_TRANSPORT_OFFSET)
        if port_free(p)
    ][:size]
    if len(http_ports) < size or len(transport) < size:
        raise EngineError(f"not enough free ports in {base}..{base + 99} for a {engine} cluster")
    peers = tuple(transport)
    return [Member(engine, i + 1, http_ports[i], transport[i], peers) for i in range(size)]


def member_of(entry: dict[str, Any]) -> Member:
    return Member(
        entry["cluster_engine"],
        int(entry["cluster_index"]),
        int(entry["port"]),
        int(entry["transport_port"]),
        tuple(int(p) for p in entry["cluster_peers"]),
    )


def launch_os_member(member: Member, fresh: bool) -> Launch:
    node = NODES[member.engine]
    dist = fetch_opensearch(node.version)
    jdk = java_home(node.min_java)
    classes = compile_launcher(dist, jdk, int(node.version.split(".")[0]))
    base = run_dir(member.name)
    if fresh:
        fresh_dir(base)
    conf = base / "node_1" / "config"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "opensearch.yml").write_text(
        member.discovery_yml("cluster.initial_cluster_manager_nodes")
    )
    (base / "tmp").mkdir(exist_ok=True)
    out = log_dir() / f"{member.name}.out"
    cmd = opensearch_command(
        jdk,
        classes,
        dist,
        base,
        CLUSTER_HEAP,
        member.cluster,
        member.http_port,
        f"-Da2m.node.name={member.name}",
    )
    proc = spawn(cmd, base, out, fresh)
    logs = [base / "node_1" / "logs" / f"{member.cluster}.log"]
    return Launch(member.name, member.http_port, proc, out, pid=proc.pid, logs=logs)


def launch_es_member(member: Member, fresh: bool) -> Launch:
    node = NODES[member.engine]
    es_home = fetch_elasticsearch(node.version)
    jdk = java_home(node.min_java)
    base = run_dir(member.name)
    es_logs = log_dir() / member.name
    prepare_elasticsearch(es_home, base, es_logs, fresh)
    (base / "config" / "elasticsearch.yml").write_text(
        member.discovery_yml("cluster.initial_master_nodes") + "xpack.security.enabled: false\n"
        "action.destructive_requires_name: false\n"
        f"path.data: {base / 'data'}\n"
        f"path.logs: {es_logs}\n"
    )
    pidfile = base / "es.pid"
    pidfile.unlink(missing_ok=True)
    cmd = elasticsearch_command(es_home, pidfile)
    out = log_dir() / f"{member.name}.out"
    proc = spawn(cmd, base, out, fresh, env=elasticsearch_env(jdk, base, CLUSTER_HEAP))
    logs = [es_logs / f"{member.cluster}.log"]
    return Launch(member.name, member.http_port, proc, out, pidfile=pidfile, logs=logs)


def launch_member(member: Member, fresh: bool) -> Launch:
    if NODES[member.engine].kind == OPENSEARCH:
        return launch_os_member(member, fresh)
    return launch_es_member(member, fresh)


def record_member(state: dict[str, dict[str, Any]], member: Member) -> None:
    if member.name in state:
        state[member.name].update(
            cluster_engine=member.engine,
            cluster_index=member.index,
            transport_port=member.transport_port,
            cluster_peers=list(member.peers),
        )


def cluster_nodes(port: int) -> int:
    """How many nodes the member on ``port`` sees in its cluster (0 when it cannot say)."""
    try:
        health = http("GET", f"http://{HOST}:{port}/_cluster/health", timeout=5)
    except (OSError, EngineError, ValueError):
        return 0
    return int(health.get("number_of_nodes") or 0)


def wait_joined(port: int, size: int, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster_nodes(port) >= size:
            return True
        time.sleep(0.5)
    return False
