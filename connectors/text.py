"""Text helpers the passage code shares: the engines' (connectors.lucene.passages) and the
gateway's own (gateway.stages.windows)."""

from __future__ import annotations


def paragraph_breaks(text: str) -> list[int]:
    """Where each blank line of ``text`` starts (``"\\n\\n"``, found left to right, not
    overlapping). Each line break is found by itself: a search for one character is
    faster than for two."""
    breaks: list[int] = []
    find, at = text.find, text.find("\n")
    while at >= 0:
        if text.startswith("\n", at + 1):
            breaks.append(at)
            at = find("\n", at + 2)
        else:
            at = find("\n", at + 1)
    return breaks
