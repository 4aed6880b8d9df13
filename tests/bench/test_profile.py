"""The py-spy summary's layers: named by the paths the project's modules have."""

from __future__ import annotations

from pathlib import Path

from bench.latency.profile import LAYERS, summarise

ROOT = Path(__file__).resolve().parents[2]


def test_every_project_path_a_layer_names_exists() -> None:
    for layer, markers in LAYERS:
        for marker in markers:
            if marker.startswith(("gateway/", "connectors/", "transports/")):
                path = marker if not marker.startswith("transports/") else f"gateway/{marker}"
                found = (ROOT / path).is_dir() or (ROOT / f"{path}.py").is_file()
                assert found or (ROOT / path).is_file(), (layer, marker)


def _stack(*frames: tuple[str, str]) -> str:
    return ";".join(f"{fn} ({path}:1)" for fn, path in frames)


def test_a_sample_counts_against_its_innermost_known_layer() -> None:
    site = "/venv/lib/python3.11/site-packages/"
    lines = [
        _stack(
            ("run", "/usr/lib/python3.11/asyncio/runners.py"),
            ("dispatch", "/w/main/gateway/a2m/dispatcher.py"),
        )
        + " 3",
        _stack(
            ("call", "/w/main/gateway/mcp/tools.py"), ("listing", "/w/main/gateway/mcp/render.py")
        )
        + " 2",
        _stack(("handle", f"{site}mcp/server/_streamable_http_modern.py")) + " 1",
        _stack(
            ("dispatch", "/w/main/gateway/a2m/dispatcher.py"),
            ("validate", f"{site}pydantic/main.py"),
        )
        + " 4",
    ]
    layers = dict(summarise(lines).layers)
    assert layers == {
        "pydantic params": 40.0,
        "dispatcher + JSON-RPC": 30.0,
        "MCP (SDK and tools)": 30.0,
    }
