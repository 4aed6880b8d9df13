"""The container image recipe: what the Dockerfile builds from and installs.

No Docker engine runs here, so the image is checked from its parts: the build
context that .dockerignore lets through must build the same wheel CI installs
(with the `a2m-gateway` console script), and the final stage must install only
that wheel, as a non-root user, with no compiler. The command the image runs is
compared with the chart's in test_chart.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def _stages() -> list[list[str]]:
    """Dockerfile instructions (continuations joined), split by FROM."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def _ignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (is_exception, regex), in file order."""
    patterns: list[tuple[bool, re.Pattern[str]]] = []
    for raw in (REPO / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        glob = line.removeprefix("!").strip("/")
        regex = ""
        i = 0
        while i < len(glob):
            if glob.startswith("**/", i):
                regex += "(?:.*/)?"
                i += 3
            elif glob.startswith("**", i):
                regex += ".*"
                i += 2
            elif glob[i] == "*":
                regex += "[^/]*"
                i += 1
            elif glob[i] == "?":
                regex += "[^/]"
                i += 1
            elif glob[i] == "[":
                end = glob.index("]", i)
                regex += glob[i : end + 1]
                i = end + 1
            else:
                regex += re.escape(glob[i])
                i += 1
        patterns.append((exception, re.compile(regex)))
    return patterns


def _in_context(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or a parent decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for exception, pattern in _ignore_patterns():
        if any(pattern.fullmatch(p) for p in prefixes):
            included = exception
    return included


def test_build_context_is_an_allow_list() -> None:
    for path in ("pyproject.toml", "README.md", "gateway/config.py", "connectors/base.py"):
        assert _in_context(path), path
    for path in (
        ".git/config",
        ".venv/bin/python",
        "tests/helm/test_chart.py",
        "helm/a2m-gateway/values.yaml",
        "config/examples/local.yaml",
        "bench/run.py",
        "gateway/__pycache__/config.cpython-311.pyc",
        ".env",
        "secrets/es-api-key",
    ):
        assert not _in_context(path), path


def test_final_stage_installs_only_the_wheels_as_non_root() -> None:
    build, final = _stages()
    assert build[0] == "FROM ${PYTHON_IMAGE} AS build"
    assert any(line.startswith('RUN pip wheel --wheel-dir /wheels ".[') for line in build)
    assert final[0] == "FROM ${PYTHON_IMAGE}"
    installs = [line for line in final if "pip install" in line]
    assert len(installs) == 1
    assert "--no-index --find-links=/wheels" in installs[0]
    assert "from=build,source=/wheels" in installs[0]
    # Nothing from the source tree reaches the final image, and no compiler.
    assert not [line for line in final if line.startswith(("COPY", "ADD"))]
    assert not re.search(r"apt-get|gcc|build-essential", "\n".join(final))
    users = [line for line in final if line.startswith("USER ")]
    assert users == ["USER 10001:10001"]
    assert final.index(users[0]) > final.index(installs[0])
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", DOCKERFILE.read_text(), re.M)


def test_build_context_builds_the_wheel_with_the_console_script(tmp_path: Path) -> None:
    """Stage 1's `pip wheel .`, on exactly the files .dockerignore lets through."""
    context = tmp_path / "context"
    for root, dirs, files in os.walk(REPO):
        base = Path(root).relative_to(REPO).as_posix().removeprefix(".")
        # Excluded directories are skipped whole (the allow-list re-includes
        # only top-level package directories), so a large .venv costs nothing.
        dirs[:] = [d for d in dirs if _in_context(f"{base}/{d}".lstrip("/"))]
        for name in files:
            relative = f"{base}/{name}".lstrip("/")
            if _in_context(relative):
                target = context / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(root) / name, target)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--wheel-dir",
            str(tmp_path / "w"),
            ".",
        ],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"pip wheel failed on the build context:\n{proc.stdout}\n{proc.stderr}")
    (wheel,) = (tmp_path / "w").glob("a2m_gateway-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    assert "gateway/config/load.py" in names  # subpackages are packaged too
    assert any(n.startswith("connectors/") for n in names)
    assert not [n for n in names if n.startswith("tests/")]
    assert re.search(r"^a2m-gateway = gateway\.cli:main$", scripts, re.M)
