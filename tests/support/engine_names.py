"""Which gateway modules name a specific engine in code (comments and docstrings aside).

``python -m tests.support.engine_names`` prints each such module and the count; engines
belong in ``connectors/`` and its registry (docs/adding-an-engine.md).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ENGINE = re.compile(r"elasticsearch|opensearch|qdrant|lucene", re.IGNORECASE)
ROOT = Path(__file__).resolve().parents[2]


def _docstrings(tree: ast.AST) -> set[int]:
    """Line numbers of prose strings: every bare string (docstrings of modules, classes,
    functions and attributes) and a config field's ``description=`` (schema text)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        text: ast.expr | None = None
        if isinstance(node, ast.Expr) or (
            isinstance(node, ast.keyword) and node.arg == "description"
        ):
            text = node.value
        if text is None or isinstance(text, ast.Name | ast.Attribute | ast.Call):
            continue
        if all(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in _parts(text)):
            lines.update(range(text.lineno, (text.end_lineno or text.lineno) + 1))
    return lines


def _parts(node: ast.expr) -> list[ast.expr]:
    """The pieces of a string expression (implicit concatenation is one Constant; an
    f-string's literal parts count, its fields do not make it code)."""
    if isinstance(node, ast.JoinedStr):
        return [v for v in node.values if isinstance(v, ast.Constant)]
    return [node]


def names_an_engine(source: str) -> bool:
    """True when a token of code (not a comment, not a docstring) names an engine."""
    prose = _docstrings(ast.parse(source))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            continue
        if token.start[0] in prose and token.type == tokenize.STRING:
            continue
        if ENGINE.search(token.string):
            return True
    return False


def engine_modules(package: Path) -> list[str]:
    """The modules under ``package`` that name an engine in code."""
    return sorted(
        p.relative_to(ROOT).as_posix()
        for p in package.rglob("*.py")
        if names_an_engine(p.read_text(encoding="utf-8"))
    )


def main() -> int:
    found = engine_modules(ROOT / "gateway")
    for name in found:
        sys.stdout.write(f"{name}\n")
    sys.stdout.write(f"{len(found)} gateway modules name an engine\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
