"""Keycloak, the identity provider of the auth tests: the Quarkus distribution from Maven
Central in dev mode (H2 in its own data dir, local caches, plain HTTP on loopback), with
the repo's realm imported twice: as `a2m` and, the same clients and users under another
issuer, `a2m-other`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.engines.manager.fetch import fetch_zip_distribution, fresh_dir
from tests.engines.manager.jdk import java_home
from tests.engines.manager.launching import Launch, failure, spawn
from tests.engines.manager.nodes import HOST, NODES, EngineError, Node
from tests.engines.manager.rest import http
from tests.engines.manager.state import log_dir, run_dir

KEYCLOAK_REALM_FILE = Path(__file__).resolve().parents[1] / "keycloak-realm.json"
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
    proc = spawn(cmd, base, out, fresh, env=env)
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
