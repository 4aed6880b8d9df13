"""An engine's JSON answer, parsed, including the JSON that orjson refuses and RFC 8259 allows.

A JSON string may escape a lone UTF-16 surrogate (``"\\ud800"``): the grammar allows it
(RFC 8259 section 8.2 leaves what a reader makes of it open), Elasticsearch and
OpenSearch store such a document as they were given it and return it in ``_source``,
and orjson refuses the whole answer. One such document would fail every search that
hits it. :func:`loads` parses that answer again with the standard library, each lone
surrogate read as U+FFFD (the replacement character), so the record's text is valid
Unicode and the gateway's own JSON can carry it. The same second reading takes a number
past a double's range (``1e400``) as an infinity, which the gateway's JSON writes as
``null``. An answer orjson parses costs
nothing more.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate in a parsed string (the standard library joins the pairs)."""


def loads(data: bytes | str) -> Any:
    """``data`` parsed as JSON; lone surrogates in its strings read as U+FFFD.

    Raises:
        ValueError: ``data`` is not JSON (orjson's ``JSONDecodeError``).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as refused:
        try:
            # UTF-8 only (RFC 8259 section 8.1), as orjson reads it: the standard library
            # would also take UTF-16 and surrogates encoded as UTF-8 bytes, and the
            # literals NaN and Infinity, none of them JSON.
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            return _repaired(json.loads(text, parse_constant=_not_json))
        except (ValueError, RecursionError):
            raise refused from None


def _not_json(literal: str) -> Any:
    raise ValueError(f"{literal} is not JSON")


def _repaired(value: Any) -> Any:
    """``value`` (parsed JSON) with each string's lone surrogates replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if not value.isascii() else value
    if isinstance(value, list):
        return [_repaired(v) for v in value]
    if isinstance(value, dict):
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    return value
