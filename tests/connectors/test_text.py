"""The text helpers the engines' and the gateway's passage code share."""

from __future__ import annotations

import re

import pytest

from connectors.text import paragraph_breaks

BLANK_LINES = [
    "",
    "no break",
    "a\nb",
    "a\nb\nc",
    "a\n\nb",
    "\n\nx",
    "\n\n\nx",
    "a\n\n\n\nb\n\n\n\n\nc",
    "a\n\n\n\nb\n\n\n\n\nc\n",
    "\n\n",
]


@pytest.mark.parametrize("text", BLANK_LINES)
def test_paragraph_breaks_are_the_blank_lines_left_to_right_not_overlapping(text: str) -> None:
    assert paragraph_breaks(text) == [m.start() for m in re.finditer("\n\n", text)]
