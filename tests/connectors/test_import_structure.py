"""Connectors import only connectors (and engine/third-party libraries), never the gateway."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import connectors

PACKAGE = Path(connectors.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))


def imported_modules(source: str) -> set[str]:
    """Every module an ``import``/``from`` names, wherever it sits (TYPE_CHECKING too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_walk_sees_nested_imports() -> None:
    # Control: an import hidden under TYPE_CHECKING or inside a function is found.
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from gateway.config import StoreConfig\n"
        "def f():\n    import gateway.store.store\n"
    )
    assert {"gateway.config", "gateway.store.store"} <= imported_modules(source)


def test_the_package_has_modules() -> None:
    names = {p.relative_to(PACKAGE).as_posix() for p in MODULES}
    assert names >= {"base.py", "spec.py", "factory.py", "qdrant/connector.py", "lucene/client.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_connector_imports_the_gateway(path: Path) -> None:
    offending = {
        name
        for name in imported_modules(path.read_text())
        if name == "gateway" or name.startswith("gateway.")
    }
    assert not offending, f"{path.name} imports {sorted(offending)}"
