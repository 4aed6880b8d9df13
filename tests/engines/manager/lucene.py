"""Single OpenSearch (the runner plus the k-NN plugin) and Elasticsearch (integ-test-zip)
nodes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.engines.manager.fetch import fetch_elasticsearch, fetch_opensearch, fresh_dir
from tests.engines.manager.jdk import compile_launcher, java_home
from tests.engines.manager.launching import Launch, spawn
from tests.engines.manager.nodes import HEAP, HOST, EngineError, Node
from tests.engines.manager.state import log_dir, run_dir

OS_KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin"


def opensearch_command(
    jdk: Path,
    classes: Path,
    dist: Path,
    base: Path,
    heap: list[str],
    cluster: str,
    port: int,
    *props: str,
) -> list[str]:
    """One OpenSearch node in one JVM (the runner's launcher, the k-NN plugin's jars on the
    classpath) answering HTTP on `port`; `props` are more ``-D`` options."""
    classpath = os.pathsep.join([str(classes), str(dist / "lib" / "*"), str(dist / "knn" / "*")])
    return [
        str(jdk / "bin" / "java"),
        *heap,
        f"-Djava.io.tmpdir={base / 'tmp'}",
        *props,
        "-cp",
        classpath,
        "OpenSearchLauncher",
        "-basePath",
        str(base),
        "-numOfNode",
        "1",
        "-clusterName",
        cluster,
        "-baseHttpPort",
        str(port - 1),  # node N listens on baseHttpPort + N
        "-pluginTypes",
        OS_KNN_PLUGIN,
    ]


def prepare_elasticsearch(es_home: Path, base: Path, es_logs: Path, fresh: bool) -> None:
    """A node's own config (copied, so the unzipped dist stays pristine), logs and tmp dirs;
    `fresh` starts them empty."""
    if fresh:
        fresh_dir(base)
        shutil.copytree(es_home / "config", base / "config")
        shutil.rmtree(es_logs, ignore_errors=True)
    es_logs.mkdir(parents=True, exist_ok=True)
    (base / "tmp").mkdir(exist_ok=True)


def elasticsearch_env(jdk: Path, base: Path, heap: list[str]) -> dict[str, str]:
    """Our environment, with the node's JDK, config dir, heap and tmp dir."""
    return dict(
        os.environ,
        ES_JAVA_HOME=str(jdk),
        ES_PATH_CONF=str(base / "config"),
        ES_JAVA_OPTS=" ".join(heap),
        ES_TMPDIR=str(base / "tmp"),
        # The CLI launcher leaves /tmp/final-flags*/gc.log dirs behind unless its tmpdir moves too.
        CLI_JAVA_OPTS=f"-Djava.io.tmpdir={base / 'tmp'}",
    )


def elasticsearch_command(es_home: Path, pidfile: Path) -> list[str]:
    """``bin/elasticsearch`` daemonised with its pid in `pidfile`. Elasticsearch refuses uid 0
    ("can not run elasticsearch as root"): as root it runs in a user namespace, where it sees
    uid 1000 while the kernel still treats it as us (root) for files and signals."""
    cmd = [str(es_home / "bin" / "elasticsearch"), "-d", "-p", str(pidfile)]
    if os.geteuid() != 0:
        return cmd
    if not shutil.which("unshare"):
        raise EngineError("running as root needs `unshare` (util-linux) for Elasticsearch")
    return ["unshare", "--user", "--map-user=1000", "--map-group=1000", *cmd]


def launch_opensearch(node: Node, port: int, fresh: bool) -> Launch:
    dist = fetch_opensearch(node.version)
    jdk = java_home(node.min_java)
    classes = compile_launcher(dist, jdk, int(node.version.split(".")[0]))
    base = run_dir(node.name)
    if fresh:
        fresh_dir(base)
    conf = base / "node_1" / "config"
    conf.mkdir(parents=True, exist_ok=True)
    # Written before the first start: the runner copies its own template only when absent.
    (conf / "opensearch.yml").write_text(
        "discovery.type: single-node\n"
        f"network.host: {HOST}\n"
        # Shared disks are often >90 % full; the watermarks would block writes.
        "cluster.routing.allocation.disk.threshold_enabled: false\n"
    )
    (base / "tmp").mkdir(exist_ok=True)
    out = log_dir() / f"{node.name}.out"
    cmd = opensearch_command(jdk, classes, dist, base, HEAP, f"a2m-{node.name}", port)
    proc = spawn(cmd, base, out, fresh)
    return Launch(
        node.name,
        port,
        proc,
        out,
        pid=proc.pid,
        logs=[base / "node_1" / "logs" / f"a2m-{node.name}.log"],
    )


def launch_elasticsearch(node: Node, port: int, fresh: bool) -> Launch:
    es_home = fetch_elasticsearch(node.version)
    jdk = java_home(node.min_java)
    base = run_dir(node.name)
    es_logs = log_dir() / node.name
    prepare_elasticsearch(es_home, base, es_logs, fresh)
    (base / "config" / "elasticsearch.yml").write_text(
        f"cluster.name: a2m-{node.name}\n"
        f"node.name: a2m-{node.name}-1\n"
        "discovery.type: single-node\n"
        f"network.host: {HOST}\n"
        f"http.port: {port}\n"
        "xpack.security.enabled: false\n"
        "cluster.routing.allocation.disk.threshold_enabled: false\n"
        "action.destructive_requires_name: false\n"  # tests delete indices by pattern
        f"path.data: {base / 'data'}\n"
        f"path.logs: {es_logs}\n"
    )
    pidfile = base / "es.pid"
    pidfile.unlink(missing_ok=True)  # a SIGKILLed node leaves it behind
    cmd = elasticsearch_command(es_home, pidfile)
    out = log_dir() / f"{node.name}.out"
    proc = spawn(cmd, base, out, fresh, env=elasticsearch_env(jdk, base, HEAP))
    return Launch(
        node.name, port, proc, out, pidfile=pidfile, logs=[es_logs / f"a2m-{node.name}.log"]
    )
