"""The bench's process helpers: what a measured start finds on disk."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from bench.process import compile_bytecode


def test_compile_bytecode_writes_the_cache_an_import_reads(tmp_path: Path) -> None:
    sources = []
    for package in ("gateway", "connectors"):
        (tmp_path / package).mkdir()
        for module in ("__init__.py", "inner.py"):
            source = tmp_path / package / module
            source.write_text("VALUE = 1\n")
            sources.append(source)

    compile_bytecode(str(tmp_path))

    for source in sources:
        assert Path(importlib.util.cache_from_source(str(source))).is_file(), source
