"""Qdrant filter translation: the connector's neutral Filter -> a Qdrant payload filter.

Pure (no I/O). ``key_prefix`` becomes a token prefilter plus an exact
``startswith`` post-check (see ``connectors.qdrant.connector``'s docstring for why).
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from connectors.base import ID_FIELD, Condition, Filter, Scalar, TimeWindows
from connectors.errors import EngineRejected

if TYPE_CHECKING:
    from qdrant_client.http import models

log = logging.getLogger("connectors.qdrant.connector")

_MAX_POINT_ID: Final = 2**64
_WORD: Final = re.compile(r"[^\W_]+")
# Characters that end a word for every Qdrant word tokenizer (regex-based in
# local mode, Unicode word boundaries on a server). '.', ':', ',' and "'" are
# not among them: Unicode keeps "v1.2" or "a:b" as one word.
_SAFE_SEPARATORS: Final = re.compile(r"[\s/\-#|()\[\]{}<>=&?!*+~]+")


class UnsatisfiableFilter(Exception):
    """A filter that no point can satisfy (an id that is not a Qdrant id, an empty any-of)."""


@dataclass(frozen=True, slots=True)
class Translated:
    qfilter: models.Filter | None
    prefix: tuple[str, str] | None
    """(payload field, exact prefix) still to check on each point."""


def translate_filter(flt: Filter) -> Translated:
    """A conjunction of equality conditions (+ key prefix) as a Qdrant payload filter.

    Raises:
        UnsatisfiableFilter: no point can satisfy the filter.
        EngineRejected: a value the client's models refuse (pydantic validation).
    """
    try:
        return _build_filter(flt)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        log.debug("qdrant filter refused: %s", exc)
        raise EngineRejected("qdrant cannot express the filter") from exc


def _build_filter(flt: Filter) -> Translated:
    from qdrant_client.http import models

    must: list[Any] = [_condition(c) for c in flt.must]
    must.extend(_time_windows(t) for t in flt.times)
    prefix: tuple[str, str] | None = None
    if flt.key_prefix is not None and flt.key_prefix[1]:
        field, value = flt.key_prefix
        prefix = (field, value)
        # One match per word: with a full-text index each is a token lookup; without one
        # (a keyword index, local mode) a server matches each as a substring, which a whole
        # word of the key always is (the words joined by spaces would not be).
        for token in dict.fromkeys(prefix_words(value)):
            must.append(models.FieldCondition(key=field, match=models.MatchText(text=token)))
    return Translated(qfilter=models.Filter(must=must) if must else None, prefix=prefix)


def with_ids(tr: Translated, ids: list[Any]) -> Translated:
    """tr narrowed to the ids of a resolved key prefix: exact, so no post-filter remains."""
    from qdrant_client.http import models

    must: list[Any] = []
    if tr.qfilter is not None and isinstance(tr.qfilter.must, list):
        must.extend(tr.qfilter.must)  # translate_filter always builds a list
    must.append(models.HasIdCondition(has_id=ids))
    return Translated(qfilter=models.Filter(must=must), prefix=None)


def _condition(cond: Condition) -> Any:
    from qdrant_client.http import models

    if not cond.values:
        raise UnsatisfiableFilter
    if cond.field == ID_FIELD:
        ids = [i for i in (point_id(v) for v in cond.values) if i is not None]
        if not ids:
            raise UnsatisfiableFilter
        return models.HasIdCondition(has_id=ids)
    values = list(dict.fromkeys(cond.values))
    if len(values) == 1:
        return _one_value(cond.field, values[0])
    if all(isinstance(v, str) for v in values):
        return models.FieldCondition(key=cond.field, match=models.MatchAny(any=values))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return models.FieldCondition(key=cond.field, match=models.MatchAny(any=values))
    # Mixed types (or floats, bools): any-of as a nested should.
    return models.Filter(should=[_one_value(cond.field, v) for v in values])


def _time_windows(times: TimeWindows) -> Any:
    from qdrant_client.http import models

    ranges = [
        models.FieldCondition(key=times.field, range=models.DatetimeRange(gte=gte, lt=lt))
        for gte, lt in times.windows
    ]
    if not ranges:
        raise UnsatisfiableFilter
    return ranges[0] if len(ranges) == 1 else models.Filter(should=ranges)


def _one_value(field: str, value: Scalar) -> Any:
    from qdrant_client.http import models

    if isinstance(value, float):
        # Qdrant matches floats by range only (MatchValue takes str/int/bool).
        return models.FieldCondition(key=field, range=models.Range(gte=value, lte=value))
    return models.FieldCondition(key=field, match=models.MatchValue(value=value))


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
