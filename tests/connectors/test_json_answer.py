"""connectors.json_answer: an engine's JSON, with the lone surrogates orjson refuses."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.json_answer import loads


def test_a_lone_surrogate_reads_as_the_replacement_character() -> None:
    raw = b'{"a": "x \\ud800 y", "b": ["\\udfff"], "\\udc00k": 1}'
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)  # not vacuous: orjson refuses the whole answer
    assert loads(raw) == {"a": "x \ufffd y", "b": ["\ufffd"], "\ufffdk": 1}


def test_a_pair_stays_one_character_and_an_escaped_backslash_is_text() -> None:
    # A pair next to a lone one: the pair is its character, the lone one U+FFFD.
    raw = b'["\\ud83d\\ude00\\ud800", "\\\\ud800"]'
    assert loads(raw) == ["\U0001f600\ufffd", "\\ud800"]
    assert loads(raw.decode()) == loads(raw)


def test_a_number_past_a_doubles_range_is_an_infinity_written_as_null() -> None:
    raw = b'{"a": 1e400, "b": -1e400, "c": "x"}'
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)
    parsed = loads(raw)
    assert parsed["a"] == float("inf")
    assert parsed["b"] == float("-inf")
    assert orjson.loads(orjson.dumps(parsed)) == {"a": None, "b": None, "c": "x"}


def test_what_is_not_json_is_still_refused() -> None:
    for raw in (b"<html>sign in</html>", b'{"a": "\xff"}', b"[" * 5000 + b"]" * 5000, b""):
        with pytest.raises(orjson.JSONDecodeError):  # a ValueError, orjson's own
            loads(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": NaN}',
        b"[Infinity]",
        b'{"a": "\\ud800", "b": -Infinity}',
        b'["\xed\xa0\x80"]',  # a surrogate encoded as UTF-8 bytes: not UTF-8
        '{"a": "\\ud800"}'.encode("utf-16"),
        '{"a": "\\ud800"}'.encode("utf-32-le"),
    ],
    ids=["nan", "infinity", "minus-infinity", "surrogate-as-utf-8", "utf-16", "utf-32"],
)
def test_what_the_standard_library_reads_and_json_is_not_is_refused(raw: bytes) -> None:
    # The second reading must not take what orjson refuses for not being JSON.
    with pytest.raises(orjson.JSONDecodeError):
        loads(raw)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_json_orjson_reads_is_read_as_orjson_reads_it(value: object) -> None:
    raw = orjson.dumps(value)
    assert loads(raw) == orjson.loads(raw)
