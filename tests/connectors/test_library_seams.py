"""The gateway meets the engine and server libraries only at their public seams.

A minor release may rename or reshape anything private in elasticsearch,
elastic-transport, opensearch-py, aiohttp or uvicorn without a failing import, and an
attribute replaced on one of their live objects breaks silently when the library
changes how it calls it. This scan of every module of ``gateway/`` and ``connectors/``
fails on: an import of a private module or name of those libraries; a private
attribute reached on one of their modules or classes; a private attribute a subclass
of one of their classes uses without defining it (the library's own, inherited);
an assignment to a method's name of one of their classes on something other than
``self`` (replacing ``transport.perform_request`` or ``connector.connect``), or to an
attribute of one of their modules or classes; and ``setattr``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBRARIES = frozenset({"elasticsearch", "elastic_transport", "opensearchpy", "aiohttp", "uvicorn"})
SCANNED = ("gateway", "connectors")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _library(module: str | None) -> bool:
    return module is not None and module.split(".", 1)[0] in LIBRARIES


HELD = {
    "elastic_transport": ("AsyncTransport", "BaseAsyncNode", "AiohttpHttpNode", "NodePool"),
    "elasticsearch": ("AsyncElasticsearch",),
    "opensearchpy": (
        "AsyncOpenSearch",
        "AsyncTransport",
        "AsyncConnection",
        "AIOHttpConnection",
        "ConnectionPool",
    ),
    "aiohttp": ("ClientSession", "BaseConnector", "TCPConnector"),
    "uvicorn": ("Server", "Config"),
}
"""The library classes whose instances the gateway holds: what a patch would replace."""


def library_methods() -> frozenset[str]:
    """The names of the methods of the library objects the gateway holds."""
    names: set[str] = set()
    for library, classes in HELD.items():
        module = importlib.import_module(library)
        for cls in (getattr(module, name) for name in classes):
            names |= {n for n, m in inspect.getmembers(cls) if callable(m) and n not in dir(object)}
    return frozenset(names)


def library_privates(module: str, name: str) -> frozenset[str]:
    """The private attributes a library class and its library bases define or use."""
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return frozenset()
    if not inspect.isclass(cls):
        return frozenset()
    found: set[str] = set()
    for klass in cls.__mro__:
        if not _library(klass.__module__):
            continue
        found |= {n for n in vars(klass) if _private(n)}
        for member in vars(klass).values():
            function = member.fget if isinstance(member, property) else member
            if not inspect.isfunction(function):
                continue
            try:  # a method's own source: some libraries rename their classes' module
                source = inspect.getsource(function)
            except (OSError, TypeError):
                continue
            found |= set(re.findall(r"self\.(_[A-Za-z0-9]\w*)", source))
    return frozenset(n for n in found if _private(n))


class _Scan(ast.NodeVisitor):
    def __init__(self, where: str, methods: frozenset[str]) -> None:
        self.where = where
        self.methods = methods
        self.found: list[str] = []
        self.library_names: set[str] = set()
        """Names bound in the module to a library module or one of its objects."""
        self.origins: dict[str, tuple[str, str]] = {}
        """Names imported from a library module: the module and the name there."""

    def _say(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.where}:{getattr(node, 'lineno', 0)}: {what}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _library(alias.name):
                self.library_names.add((alias.asname or alias.name).split(".", 1)[0])
                if any(_private(part) for part in alias.name.split(".")):
                    self._say(node, f"imports the private module {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not _library(node.module):
            return
        assert node.module is not None
        if any(_private(part) for part in node.module.split(".")):
            self._say(node, f"imports from the private module {node.module}")
        for alias in node.names:
            self.library_names.add(alias.asname or alias.name)
            if _private(alias.name):
                self._say(node, f"imports the private name {node.module}.{alias.name}")

    def _root(self, node: ast.expr) -> str | None:
        while isinstance(node, ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr) and self._root(node.value) in self.library_names:
            self._say(node, f"reaches the library's private {node.attr}")
        self.generic_visit(node)

    def check_private_use(self, tree: ast.Module) -> None:
        """``self._x`` where ``_x`` is a private of a library class this module imports
        and nothing in the module defines it: the library's own, used by a subclass or
        by a mixin combined with one."""
        for sub in ast.walk(tree):
            if isinstance(sub, ast.ImportFrom) and _library(sub.module):
                for alias in sub.names:
                    self.origins[alias.asname or alias.name] = (str(sub.module), alias.name)
        theirs: set[str] = set()
        for module, name in self.origins.values():
            theirs |= library_privates(module, name)
        own: set[str] = set()
        for sub in ast.walk(tree):
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(sub.name)
            targets = sub.targets if isinstance(sub, ast.Assign) else []
            targets += [sub.target] if isinstance(sub, ast.AnnAssign | ast.AugAssign) else []
            own |= {t.attr for t in targets if isinstance(t, ast.Attribute)}
            own |= {t.id for t in targets if isinstance(t, ast.Name)}
        for sub in ast.walk(tree):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id in ("self", "cls")
                and sub.attr in theirs - own
            ):
                self._say(sub, f"uses the library class's private {sub.attr}")

    def _assigned(self, target: ast.expr) -> None:
        if not isinstance(target, ast.Attribute):
            return
        root = self._root(target.value)
        if root in self.library_names:
            self._say(target, f"assigns {target.attr} on a library module or class")
        elif root not in ("self", "cls") and target.attr in self.methods:
            self._say(target, f"replaces {target.attr} on an object (a library method's name)")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assigned(node.target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "setattr":
            self._say(node, "calls setattr")
        self.generic_visit(node)


def scan(root: Path, methods: frozenset[str]) -> Iterator[str]:
    """Every breach of the seams in the packages under ``root``."""
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            visitor = _Scan(str(path.relative_to(root)), methods)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            visitor.check_private_use(tree)
            visitor.visit(tree)
            yield from visitor.found


@pytest.fixture(scope="module")
def methods() -> frozenset[str]:
    return library_methods()


def test_no_private_part_of_a_library_is_used_and_no_library_object_is_patched(
    methods: frozenset[str],
) -> None:
    assert list(scan(REPO, methods)) == []


BREACHES = {
    "from elastic_transport._models import DEFAULT\n": "private module",
    "import aiohttp.client_reqrep._x\n": "private module",
    "from opensearchpy import _secret\n": "private name",
    "import uvicorn\nuvicorn.main._helper()\n": "private _helper",
    "from opensearchpy import AIOHttpConnection\n"
    "class C(AIOHttpConnection):\n"
    "    def f(self):\n"
    "        return self._raise_error(1)\n": "private _raise_error",
    "from opensearchpy import AIOHttpConnection\n"
    "class Mixin:\n"
    "    def f(self):\n"
    "        return self._ssl_context\n"
    "class C(Mixin, AIOHttpConnection):\n"
    "    pass\n": "private _ssl_context",
    "def wrap(transport):\n    transport.perform_request = None\n": "replaces perform_request",
    "def watch(connector):\n    connector.connect = None\n": "replaces connect",
    "import aiohttp\naiohttp.ClientSession.request = None\n": "assigns request",
    "def put(o):\n    setattr(o, 'x', 1)\n": "setattr",
}


@pytest.mark.parametrize("source", list(BREACHES))
def test_the_scan_finds_each_kind_of_breach(
    source: str, methods: frozenset[str], tmp_path: Path
) -> None:
    (tmp_path / "connectors").mkdir()
    (tmp_path / "gateway").mkdir()
    (tmp_path / "connectors" / "breach.py").write_text(source)
    [found] = scan(tmp_path, methods)
    assert BREACHES[source] in found


def test_own_private_attributes_of_a_library_subclass_pass(
    methods: frozenset[str], tmp_path: Path
) -> None:
    (tmp_path / "connectors").mkdir()
    (tmp_path / "gateway").mkdir()
    (tmp_path / "connectors" / "own.py").write_text(
        "from elastic_transport import BaseAsyncNode\n"
        "class Node(BaseAsyncNode):\n"
        "    def __init__(self, config):\n"
        "        self._pool = None\n"
        "    def pool(self):\n"
        "        return self._pool\n"
    )
    assert list(scan(tmp_path, methods)) == []
