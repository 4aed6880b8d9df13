"""Qdrant filter translation: the connector's neutral Filter -> a payload filter of conditions.

Pure (no I/O, no client library): the conditions here are the engine-neutral shape
of a Qdrant payload filter, which the server client (``connectors.qdrant.server_models``)
and the in-process engine (``connectors.qdrant.edge_models``) each turn into their
own request objects. ``key_prefix`` becomes a token prefilter plus an exact
``startswith`` post-check (see ``connectors.qdrant.connector``'s docstring for why).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Final

from connectors.base import ID_FIELD, Condition, Filter, Scalar, TimeWindows

_MAX_POINT_ID: Final = 2**64
_WORD: Final = re.compile(r"[^\W_]+")
# Characters that end a word for every Qdrant word tokenizer (Unicode word
# boundaries). '.', ':', ',' and "'" are not among them: Unicode keeps "v1.2" or
# "a:b" as one word.
_SAFE_SEPARATORS: Final = re.compile(r"[\s/\-#|()\[\]{}<>=&?!*+~]+")

PointId = int | str


class UnsatisfiableFilter(Exception):
    """A filter that no point can satisfy (an id that is not a Qdrant id, an empty any-of)."""


@dataclass(frozen=True, slots=True)
class Match:
    """The field holds this value (a keyword, an integer or a bool)."""

    field: str
    value: str | int | bool


@dataclass(frozen=True, slots=True)
class MatchAnyOf:
    """The field holds one of these values (all strings or all integers)."""

    field: str
    values: tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Words:
    """The field's text holds this word (Qdrant's ``MatchText``)."""

    field: str
    text: str


@dataclass(frozen=True, slots=True)
class HasIds:
    """The point id is one of these."""

    ids: tuple[PointId, ...]


@dataclass(frozen=True, slots=True)
class FloatRange:
    """gte <= the field's number <= lte (floats match by range only)."""

    field: str
    gte: float
    lte: float


@dataclass(frozen=True, slots=True)
class DateRange:
    """gte <= the field's datetime < lt (ISO-8601 strings)."""

    field: str
    gte: str
    lt: str


@dataclass(frozen=True, slots=True)
class AnyOf:
    """At least one of the conditions holds (a nested ``should``)."""

    conditions: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class NoneOf:
    """None of the conditions holds (a nested ``must_not``)."""

    conditions: tuple[Cond, ...]


Cond = Match | MatchAnyOf | Words | HasIds | FloatRange | DateRange | AnyOf | NoneOf


@dataclass(frozen=True, slots=True)
class AllOf:
    """Every condition holds (a filter's ``must``)."""

    conditions: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class Translated:
    qfilter: AllOf | None
    prefix: tuple[str, str] | None
    """(payload field, exact prefix) still to check on each point."""


def translate_filter(flt: Filter) -> Translated:
    """A conjunction of equality conditions (+ key prefix) as a Qdrant payload filter.

    Raises:
        UnsatisfiableFilter: no point can satisfy the filter.
    """
    must: list[Cond] = [_condition(c) for c in flt.must]
    must.extend(_time_windows(t) for t in flt.times)
    left_out = [c for c in map(_exclusion, flt.must_not) if c is not None]
    if left_out:
        must.append(NoneOf(tuple(left_out)))
    prefix: tuple[str, str] | None = None
    if flt.key_prefix is not None and flt.key_prefix[1]:
        field, value = flt.key_prefix
        prefix = (field, value)
        # One match per word: with a full-text index each is a token lookup; without one
        # (a keyword index, or none) the engine matches each as a substring, which a whole
        # word of the key always is (the words joined by spaces would not be).
        must.extend(Words(field, token) for token in dict.fromkeys(prefix_words(value)))
    return Translated(qfilter=AllOf(tuple(must)) if must else None, prefix=prefix)


def with_ids(tr: Translated, ids: list[Any]) -> Translated:
    """tr narrowed to the ids of a resolved key prefix: exact, so no post-filter remains."""
    must = tr.qfilter.conditions if tr.qfilter is not None else ()
    return Translated(qfilter=AllOf((*must, HasIds(tuple(ids)))), prefix=None)


def _condition(cond: Condition) -> Cond:
    if not cond.values:
        raise UnsatisfiableFilter
    if cond.field == ID_FIELD:
        ids = [i for i in (point_id(v) for v in cond.values) if i is not None]
        if not ids:
            raise UnsatisfiableFilter
        return HasIds(tuple(ids))
    values = list(dict.fromkeys(cond.values))
    if len(values) == 1:
        return _one_value(cond.field, values[0])
    strings = [v for v in values if isinstance(v, str)]
    if len(strings) == len(values):
        return MatchAnyOf(cond.field, tuple(strings))
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(ints) == len(values):
        return MatchAnyOf(cond.field, tuple(ints))
    # Mixed types (or floats, bools): any-of as a nested should.
    return AnyOf(tuple(_one_value(cond.field, v) for v in values))


def _exclusion(cond: Condition) -> Cond | None:
    """A ``must_not`` condition, None where it leaves nothing out (no value, no usable
    id) or is not an exact match."""
    if cond.phrase:
        return None
    try:
        return _condition(cond)
    except UnsatisfiableFilter:
        return None


def _time_windows(times: TimeWindows) -> Cond:
    ranges = [DateRange(times.field, gte, lt) for gte, lt in times.windows]
    if not ranges:
        raise UnsatisfiableFilter
    return ranges[0] if len(ranges) == 1 else AnyOf(tuple(ranges))


def _one_value(field: str, value: Scalar) -> Cond:
    if isinstance(value, float):
        # Qdrant matches floats by range only (a match takes str/int/bool).
        return FloatRange(field, value, value)
    return Match(field, value)


def point_id(value: Scalar) -> int | str | None:
    """A Qdrant point id (unsigned int or UUID) from a condition value, or None."""
    if isinstance(value, bool | float):
        return None
    if isinstance(value, int):
        return value if 0 <= value < _MAX_POINT_ID else None
    if value.isascii() and value.isdigit():
        n = int(value)
        return n if n < _MAX_POINT_ID else None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def prefix_words(prefix: str) -> list[str]:
    """The words of prefix that are whole tokens of every key starting with it.

    The last segment may be cut mid-word ("scifact/12" -> "12" could be the
    start of "123"), so only segments followed by a separator count, and only
    pure letter/digit runs, which every word tokenizer keeps intact.
    """
    parts = _SAFE_SEPARATORS.split(prefix)
    return [p.lower() for p in parts[:-1] if p and _WORD.fullmatch(p)]


def has_prefix(payload: dict[str, Any] | None, prefix: tuple[str, str] | None) -> bool:
    if prefix is None:
        return True
    field, value = prefix
    current: Any = payload or {}
    for part in field.split("."):  # dotted paths, like Qdrant's payload keys
        if not isinstance(current, dict):
            return False
        current = current.get(part)
    if isinstance(current, list):
        return any(isinstance(v, str) and v.startswith(value) for v in current)
    return isinstance(current, str) and current.startswith(value)
