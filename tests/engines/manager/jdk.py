"""The local JDK each node runs on (never downloaded), and the OpenSearch launcher it compiles."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.engines.manager.fetch import fresh_dir
from tests.engines.manager.nodes import EngineError

LAUNCHER_SRC = Path(__file__).resolve().parents[1] / "OpenSearchLauncher.java"
# Empty interfaces of the unpublished transport-grpc SPI that the 3.x k-NN plugin loads.
OS3_SHIM = Path(__file__).resolve().parents[1] / "opensearch3-shim"


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
