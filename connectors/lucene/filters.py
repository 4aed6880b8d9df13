"""Filters as non-scoring ``bool.filter`` clauses: the part of every body that holds the scope.

Searches, kNN legs, ordered pages and fetches all restrict by the same clauses,
so they are built in one place; :class:`connectors.lucene.query.QueryTranslator`
adds the scoring query, the shared body parts and the hits on top.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from connectors.base import ID_FIELD, Condition, Filter, TimeWindows
from connectors.errors import QueryTooLarge

Body = dict[str, Any]

MAX_PREFIX_QUERY = 1000
"""The longest key prefix the engines match (Lucene's automaton limit, ``max_regex_length``)."""


def any_of(clauses: list[Body]) -> Body:
    """Any of the clauses (none: nothing matches)."""
    if not clauses:
        return {"match_none": {}}
    if len(clauses) == 1:
        return clauses[0]
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


class FilterTranslator:
    """Equality, time windows and key prefixes as clauses; text on its keyword sub-field."""

    def __init__(
        self,
        *,
        exact_fields: Mapping[str, str] | None = None,
        text_only_fields: Collection[str] = (),
    ) -> None:
        self._exact = dict(exact_fields or {})
        self._text_only = frozenset(text_only_fields)

    def exact(self, field: str) -> str:
        """The field to filter/sort/collapse on for ``field`` (its keyword sub-field if text)."""
        return self._exact.get(field, field)

    def condition(self, cond: Condition) -> Body:
        """One equality condition as a non-scoring clause."""
        if not cond.values:
            return {"match_none": {}}
        if cond.field == ID_FIELD:
            return {"ids": {"values": [str(v) for v in cond.values]}}
        if cond.field in self._text_only or (cond.phrase and cond.field not in self._exact):
            # Analysed text without a keyword sub-field: a term query would compare against
            # tokens, so match the phrase here; the store checks exact equality after.
            return any_of([{"match_phrase": {cond.field: str(v)}} for v in cond.values])
        field = self.exact(cond.field)
        if len(cond.values) == 1:
            return {"term": {field: {"value": cond.values[0]}}}
        return {"terms": {field: list(cond.values)}}

    def time_windows(self, times: TimeWindows) -> Body:
        """A date field inside any of the windows (ISO 8601 values, whatever the field format)."""
        field = self.exact(times.field)
        return any_of(
            [
                {"range": {field: {"gte": gte, "lt": lt, "format": "strict_date_optional_time"}}}
                for gte, lt in times.windows
            ]
        )

    def filter_clauses(self, flt: Filter) -> list[Body]:
        """The filter as a list of ``bool.filter`` clauses (empty for no filter)."""
        clauses = [self.condition(c) for c in flt.must]
        clauses.extend(self.time_windows(t) for t in flt.times)
        if flt.key_prefix is not None:
            field, prefix = flt.key_prefix
            clauses.append(self.key_prefix(self.exact(field), prefix))
        left_out = [c for c in map(self.exclusion, flt.must_not) if c is not None]
        if left_out:
            clauses.append({"bool": {"must_not": left_out}})
        return clauses

    def exclusion(self, cond: Condition) -> Body | None:
        """A ``must_not`` condition as a clause; None where it cannot be matched exactly
        (analysed text without a keyword sub-field: a phrase would leave out more)."""
        if not cond.values or cond.phrase or cond.field in self._text_only:
            return None
        return self.condition(cond)

    @staticmethod
    def key_prefix(field: str, prefix: str) -> Body:
        """Keys starting with ``prefix``.

        Raises:
            QueryTooLarge: the prefix is longer than the engines can match (every
                automaton query, prefix and range alike, stops at 1000 characters).
        """
        if len(prefix) > MAX_PREFIX_QUERY:
            raise QueryTooLarge(f"a key prefix longer than {MAX_PREFIX_QUERY} characters")
        return {"prefix": {field: {"value": prefix}}}

    def filtered(self, flt: Filter, scoring: Body | None = None) -> Body:
        """A query: ``scoring`` (or match_all) restricted by ``flt`` without changing scores."""
        clauses = self.filter_clauses(flt)
        if not clauses:
            return scoring if scoring is not None else {"match_all": {}}
        query: Body = {"bool": {"filter": clauses}}
        if scoring is not None:
            query["bool"]["must"] = [scoring]
        return query
