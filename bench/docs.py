"""Writes a generated section into docs/benchmarks.md between two marker comments,
so a harness can refresh its own table without touching the prose around it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS_MD = REPO / "docs" / "benchmarks.md"
IMG_DIR = REPO / "docs" / "img"


def replace_section(path: Path, name: str, content: str) -> None:
    """Replace the text between ``<!-- name:begin -->`` and ``<!-- name:end -->``.

    Raises:
        ValueError: the file lacks the markers (the prose is written by hand, once).
    """
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = path.read_text(encoding="utf-8")
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"{path} has no {begin} ... {end} section")
    new = text[: start + len(begin)] + "\n" + content.rstrip() + "\n" + text[stop:]
    path.write_text(new, encoding="utf-8")
