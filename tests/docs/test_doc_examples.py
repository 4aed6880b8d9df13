"""Every config example in README.md, SECURITY.md and docs/*.md is loaded by the real config
loader, and every CLI hint that can run offline is run as written. What cannot run here is
listed in NOT_RUN with the reason, so a new example is either checked or named.

A YAML block that is a fragment (a `search:` section, one store's `scope:`) is laid over a
minimal base config, BASE, before it is loaded: the fragment's own keys are what is checked.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import load_config
from gateway.config.auth import parse_api_keys

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "SECURITY.md", *sorted((REPO / "docs").glob("*.md"))]

BASE: dict[str, Any] = {
    "stores": {
        name: {
            "backend": "elasticsearch",
            "index": name,
            "connection": {"hosts": ["https://search.example.com:9200"]},
            "mapping": {"content": "body"},
            "search": {"text_fields": ["body"]},
        }
        for name in ("docs", "tickets", "wiki", "design-docs")
    }
}
"""What a fragment is laid over: stores named as the docs' examples name them."""

STORE_KEYS = {"search", "resilience", "mapping", "scope", "limits", "connection"}
"""Top-level keys of a fragment that is one store's section."""

KEY_FILE = "/etc/a2m-gateway/secrets/api-keys.yaml"
"""The key file the examples name; the test writes SECURITY.md's own example of it there."""

HELM_VALUES = "Helm values, not a gateway config (tests/helm renders the chart's own values)"
NOT_RUN: dict[tuple[str, str], str] = {
    ("docs/helm.md", "image:"): HELM_VALUES,
    ("docs/helm.md", "existingSecret:"): HELM_VALUES,
    ("docs/helm.md", "secretEnv:"): HELM_VALUES,
    ("docs/helm.md", "config:"): HELM_VALUES,
    ("docs/operations.md", "extraEnv:"): HELM_VALUES,
}
"""YAML blocks not loaded, by (file, first line), with the reason."""

COMMANDS_NOT_RUN = {
    "pip install": "downloads from PyPI; the extras named are checked to exist instead",
    "python3 -m venv .venv": "the install itself; the tests run inside the installed package",
    "./scripts/test": "the test command that runs this test",
    "curl": "needs a running `serve`; tests/conformance/test_http.py sends these calls",
    "claude mcp add": "needs Claude Code; the stdio commands they name are run below",
    "a2m-gateway serve": "long-running; tests/gateway/test_processes.py serves the demo",
    "a2m-gateway stdio --config config/examples": "needs a cluster",
    "a2m-gateway check --config config/examples": "needs a cluster; the config is loaded below",
    "a2m-gateway serve --config config/examples": "needs a cluster; the config is loaded below",
    "kubectl": "needs a Kubernetes cluster (tests/helm renders and boots the chart)",
    "helm": "needs a Kubernetes cluster (tests/helm renders and boots the chart)",
    "docker": "needs Docker (tests/helm/test_image.py checks the Dockerfile)",
    "python -m bench": "benchmarks on real engines (bench/README.md)",
    "python tests/engines": "starts engines (tests/engines/test_engines_script.py)",
    "a2m-gateway serve --config gateway.yaml": "long-running, and a config of the reader's",
    "a2m-gateway mcp --config": "a config of the reader's; docs/mcp.md's demo form is run",
    "export ": "an environment variable, not a command",
}
"""Shell hints not run here, by prefix, with the reason."""


@dataclass(frozen=True)
class Block:
    path: str
    line: int
    lang: str
    text: str

    @property
    def first(self) -> str:
        lines = [ln for ln in self.text.splitlines() if ln.strip() and not ln.startswith("#")]
        return lines[0].strip() if lines else ""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def blocks(*langs: str) -> list[Block]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            if m.group(1) in langs:
                line = text[: m.start()].count("\n") + 1
                out.append(Block(str(doc.relative_to(REPO)), line, m.group(1), m.group(2)))
    return out


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {k: _merge(base.get(k), v) if k in base else v for k, v in {**base, **over}.items()}
    return over


def _not_run(block: Block) -> str | None:
    for (path, first), reason in NOT_RUN.items():
        if block.path == path and block.first.startswith(first):
            return reason
    return None


def _key_file_example() -> str:
    found = [b for b in blocks("yaml") if b.text.startswith(f"# {KEY_FILE}")]
    assert len(found) == 1, "SECURITY.md's example of the key file"
    return found[0].text


CONFIG_BLOCKS = [b for b in blocks("yaml") if not b.text.startswith(f"# {KEY_FILE}")]


@pytest.mark.parametrize("block", CONFIG_BLOCKS, ids=[b.id for b in CONFIG_BLOCKS])
def test_every_config_example_loads(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = _not_run(block)
    if reason is not None:
        assert "helm" in reason.lower()  # the only kind of block excused, and it says why
        return
    data = yaml.safe_load(block.text)
    assert isinstance(data, dict), block.id
    if set(data) <= STORE_KEYS:
        data = {"stores": {"docs": data}}
    keys = tmp_path / "api-keys.yaml"
    keys.write_text(_key_file_example())
    text = yaml.safe_dump(_merge(BASE, data)).replace(KEY_FILE, str(keys))
    for name in re.findall(r"\$\{([A-Z_][A-Z0-9_]*)\}", text):
        monkeypatch.setenv(name, "an-example-value-of-32-characters-at-least")
    # A mounted secret the example names: a file of the same kind stands in for it.
    for i, path in enumerate(sorted(set(re.findall(r"\$\{file:([^}]+)\}", text)))):
        secret = tmp_path / f"secret-{i}"
        secret.write_text("an-example-value-of-32-characters-at-least")
        text = text.replace(f"${{file:{path}}}", f"${{file:{secret}}}")
    config = tmp_path / "config.yaml"
    config.write_text(text)
    load_config(config)


def test_the_key_file_example_is_a_valid_key_file() -> None:
    entries = parse_api_keys(yaml.safe_load(_key_file_example()))
    assert [e.subject for e in entries] == ["ci-bot"]


@pytest.mark.parametrize("path", sorted((REPO / "config").rglob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in re.findall(r"\$\{([A-Z_][A-Z0-9_]*)\}", path.read_text()):
        monkeypatch.setenv(name, "an-example-value-of-32-characters-at-least")
    load_config(path)


# -- shell hints -----------------------------------------------------------------------------


def _commands() -> list[tuple[Block, str]]:
    """Each command line of the shell blocks (a `$ ` prompt's command in console blocks)."""
    out = []
    for block in blocks("bash", "sh", "console"):
        joined = re.sub(r"\\\n\s*", " ", block.text)
        for line in joined.splitlines():
            line = line.strip()
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            # A line inside a quoted multi-line argument (a JSON body) is no command.
            if line and re.match(r"[\w./$]", line) and not line.startswith("#"):
                out.append((block, re.split(r"\s+#\s", line, maxsplit=1)[0].strip()))
    return out


def _excused(command: str) -> str | None:
    bare = command.replace(".venv/bin/a2m-gateway", "a2m-gateway")
    for prefix, reason in COMMANDS_NOT_RUN.items():
        if bare.startswith(prefix):
            return reason
    return None


GATEWAY_HINTS = [(b, c) for b, c in _commands() if "a2m-gateway" in c and _excused(c) is None]
"""Every shell line of the docs that runs the gateway and is not excused: each is run below."""


def test_every_gateway_hint_is_run_or_excused() -> None:
    every = [(b, c) for b, c in _commands() if "a2m-gateway" in c]
    excused = [c for _, c in every if _excused(c) is not None]
    assert len(GATEWAY_HINTS) + len(excused) == len(every)
    assert GATEWAY_HINTS, "the README's recall on the demo at least"


def _shim(tmp_path: Path) -> dict[str, str]:
    """PATH with `a2m-gateway` as this interpreter's gateway (the README's .venv/bin one)."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "a2m-gateway"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m gateway "$@"\n')
    shim.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "EXISTING_KEY": "an-existing-key-of-at-least-32-characters",
    }


def _hint_params() -> list[Any]:
    out = []
    for block, command in GATEWAY_HINTS:
        demo = any(word in command.split() for word in ("recall", "check", "mcp", "stdio"))
        marks = [pytest.mark.integration] if demo else []
        out.append(pytest.param(block, command, marks=marks, id=f"{block.id} {command[:40]}"))
    return out


@pytest.mark.parametrize(("block", "command"), _hint_params())
def test_a_gateway_hint_runs_as_written(block: Block, command: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", "-c", command.replace(".venv/bin/a2m-gateway", "a2m-gateway")],
        capture_output=True,
        text=True,
        timeout=600,  # a first hybrid start of the demo embeds its corpus
        cwd=tmp_path,
        env=_shim(tmp_path),
        check=False,
    )
    assert proc.returncode == 0, (block.id, proc.stderr)
    assert "Traceback" not in proc.stderr
    if block.lang == "console":  # the output shown under the prompt, ranks and titles
        strip = re.compile(r"\[[0-9.]+\] ")  # scores differ between lexical and hybrid
        shown = [strip.sub("", ln) for ln in block.text.splitlines() if re.match(r"\d+\. ", ln)]
        printed = [strip.sub("", ln) for ln in proc.stdout.splitlines() if re.match(r"\d+\. ", ln)]
        assert printed == shown


RUN = [
    ["--help"],
    ["--version"],
    *[[cmd, "--help"] for cmd in ("serve", "stdio", "mcp", "check", "recall", "hash-key")],
]
"""The README's `a2m-gateway --help` and `a2m-gateway <command> --help`."""


@pytest.mark.parametrize("args", RUN, ids=" ".join)
def test_help_and_version_run(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


@pytest.mark.integration
def test_check_on_the_demo_runs_as_the_readme_says() -> None:
    """`check` with no --config is the demo (README: every command uses the demo store)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gateway", "check"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"ok": true' in proc.stdout


# -- install hints and figures ---------------------------------------------------------------


def test_every_extra_a_doc_names_exists() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named = set()
    for doc in DOCS:
        named |= set(re.findall(r"pip install -e '\.\[([a-z-]+)\]'", doc.read_text()))
    assert named
    assert named <= set(extras), named - set(extras)
    for doc in DOCS:
        assert "a2m-gateway[" not in doc.read_text(), f"{doc.name}: a package on no index"


def test_the_minilm_extra_has_one_size_everywhere() -> None:
    sizes = set()
    for doc in DOCS:
        for paragraph in doc.read_text().split("\n\n"):
            if "minilm" in paragraph.lower():
                sizes |= set(
                    re.findall(r"(\d+) MB (?:more to install|, no torch|to\s+site)", paragraph)
                )
    assert len(sizes) == 1, sizes


# -- MCP stdio client configurations -----------------------------------------------------------


def _stdio_configs() -> list[Any]:
    import json

    out = []
    for block in blocks("json"):
        if block.path != "docs/mcp.md" or '"command"' not in block.text:
            continue
        for name, server in json.loads(block.text)["mcpServers"].items():
            out.append(pytest.param(server, id=f"{block.id} {name}"))
    return out


def _launch(server: dict[str, Any]) -> tuple[str, list[str]]:
    command = str(server["command"]).replace("/path/to/a2m-gateway", str(REPO))
    assert Path(command).is_file(), f"{command}: the README's install makes it"
    demo = str(REPO / "config/demo.yaml")
    return command, [str(a).replace("/path/to/gateway.yaml", demo) for a in server["args"]]


@pytest.mark.integration
@pytest.mark.parametrize("server", _stdio_configs())
async def test_a_stdio_client_configuration_starts_the_gateway(server: dict[str, Any]) -> None:
    """The command and args as a client launches them, the reader's paths put in."""
    from mcp import Client, StdioServerParameters

    command, args = _launch(server)
    params = StdioServerParameters(command=command, args=args)
    async with Client(params, read_timeout_seconds=600) as client:  # a first start embeds
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == {"search", "fetch", "timeline"}


def test_the_stdio_configurations_include_the_demo_without_a_config() -> None:
    servers = [p.values[0] for p in _stdio_configs()]
    assert ["mcp"] in [s["args"] for s in servers]
    # Not a bare `a2m-gateway`: after the README's install it is on no client's PATH.
    assert all(Path(s["command"]).is_absolute() for s in servers)
