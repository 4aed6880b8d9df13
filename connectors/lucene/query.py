"""The Lucene query DSL Elasticsearch and OpenSearch both speak: spec + request in, body out.

Pure (no I/O), so unit tests need no engine. Rules the translator keeps:

- Lexical search is a ``multi_match`` over ``search.text_fields`` (with their
  ``^boost``); the caller's text is only ever a match *value*, never query
  syntax (no ``query_string``/``simple_query_string``).
- Filters are non-scoring ``bool.filter`` clauses: equality → ``term``/``terms``
  (the engine id → ``ids``), a key prefix → ``prefix`` on the key field.
  A text field with a keyword sub-field is filtered, sorted and collapsed on
  the sub-field (found in the mapping at open()).
- ``_source`` carries only ``fields.read``: nothing unmapped ever
  leaves the engine.
- Every body carries the request's filter, which holds the caller's scope:
  searches, kNN legs, ordered pages and fetches alike.

Ordered reads and fetches are built in :mod:`connectors.lucene.order`, hybrid
legs planned in :mod:`connectors.lucene.hybrid`; both build on this class.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connectors.base import (
    ID_FIELD,
    Condition,
    Filter,
    Hit,
    SearchRequest,
    TimeWindows,
)
from connectors.errors import EngineConfigError, QueryTooLarge

if TYPE_CHECKING:
    from connectors.spec import ConnectorSpec, FieldsSpec

Body = dict[str, Any]

PAGE_SIZE = 1000
"""Documents per ordered-read request; longer reads page on with ``search_after``."""

MAX_WINDOW = 10_000
"""The engines' default ``index.max_result_window`` and their ceiling for kNN ``k``."""

MAX_PREFIX_QUERY = 1000
"""The longest key prefix the engines match (Lucene's automaton limit, ``max_regex_length``)."""


@dataclass(frozen=True, slots=True)
class TextField:
    """One entry of ``search.text_fields``: a field name and its optional ``^boost``."""

    name: str
    boost: float | None = None

    @property
    def spec(self) -> str:
        """The ``field^boost`` form multi_match takes."""
        if self.boost is None:
            return self.name
        return f"{self.name}^{self.boost:g}"


def parse_text_fields(specs: Iterable[str]) -> tuple[TextField, ...]:
    """Parse ``search.text_fields`` entries (``title^2``, ``text``).

    Raises:
        EngineConfigError: an entry is empty or its boost is not a positive number.
    """
    out: list[TextField] = []
    for spec in specs:
        name, sep, boost_text = spec.partition("^")
        name = name.strip()
        if not name:
            raise EngineConfigError("search.text_fields: an entry has no field name")
        if not sep:
            out.append(TextField(name))
            continue
        try:
            boost = float(boost_text)
        except ValueError:
            raise EngineConfigError(
                f"search.text_fields: the boost of {name!r} is not a number"
            ) from None
        if not math.isfinite(boost) or boost <= 0:
            raise EngineConfigError(f"search.text_fields: the boost of {name!r} must be > 0")
        out.append(TextField(name, boost))
    return tuple(out)


def any_of(clauses: list[Body]) -> Body:
    """Any of the clauses (none: nothing matches)."""
    if not clauses:
        return {"match_none": {}}
    if len(clauses) == 1:
        return clauses[0]
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


class QueryTranslator:
    """Builds ``_search`` bodies for one store. Pure: spec and requests in, dicts out.

    The kNN clause is the dialect's (its syntax differs between engines); this
    class gives it the filter clauses and the shared parts of the body.
    """

    def __init__(
        self,
        spec: ConnectorSpec,
        *,
        exact_fields: Mapping[str, str] | None = None,
        text_only_fields: Collection[str] = (),
        multi_match_type: str = "best_fields",
    ) -> None:
        """
        Args:
            spec: the store's connector spec.
            exact_fields: text field → keyword sub-field (from the index mapping).
            text_only_fields: analysed text fields with no keyword sub-field.
            multi_match_type: ``best_fields`` unless the store asks otherwise.

        Raises:
            EngineConfigError: ``search.text_fields`` is malformed.
        """
        self._spec = spec
        self._mapping = spec.fields
        self._search = spec.search
        self._exact = dict(exact_fields or {})
        self._text_only = frozenset(text_only_fields)
        self._text_fields = parse_text_fields(spec.search.text_fields)
        self._multi_match_type = multi_match_type
        self._source_fields = list(spec.fields.read)

    # ---- pieces

    def exact(self, field: str) -> str:
        """The field to filter/sort/collapse on for ``field`` (its keyword sub-field if text)."""
        return self._exact.get(field, field)

    @property
    def fields(self) -> FieldsSpec:
        """The store's fields (what is read, ordered, grouped)."""
        return self._mapping

    @property
    def text_fields(self) -> tuple[TextField, ...]:
        return self._text_fields

    @property
    def collapse_field(self) -> str | None:
        """The field results collapse on, when ``search.collapse_group`` is set."""
        if self._search.collapse_group and self._mapping.group:
            return self.exact(self._mapping.group)
        return None

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
        return clauses

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

    def source(self, *, with_vectors: bool) -> Body:
        """``_source`` limited to the mapped fields (plus the vector when asked for)."""
        fields = list(self._source_fields)
        vf = self._search.vector_field
        if with_vectors and vf and vf not in fields:
            fields.append(vf)
        return {"includes": fields}

    def multi_match(self, text: str) -> Body:
        """The lexical clause: the caller's text is a match value, never query syntax.

        Raises:
            EngineConfigError: the store has no ``search.text_fields``.
        """
        if not self._text_fields:
            raise EngineConfigError("search.text_fields: lexical search needs text fields")
        return {
            "multi_match": {
                "query": text,
                "fields": [f.spec for f in self._text_fields],
                "type": self._multi_match_type,
            }
        }

    def highlight(self) -> Body | None:
        """The highlight clause for the content field, when ``search.highlight`` is on.

        Only a single ``mapping.content`` field can be highlighted (a template
        has no one field to take a fragment of). Tags are empty because the
        fragment becomes the record's plain-text content; markup would corrupt it.
        ``require_field_match: false`` lets a term matched in the title pick the
        best passage of the content too.
        """
        content = self._mapping.content
        if not self._search.highlight or not content:
            return None
        size = self._search.highlight_fragment_size
        return {
            "pre_tags": [""],
            "post_tags": [""],
            "require_field_match": False,
            "fields": {content: {"fragment_size": size, "number_of_fragments": 1}},
        }

    def common(self, size: int, *, with_vectors: bool) -> Body:
        """What every body shares: its size and ``_source``, and no total count."""
        return {
            "size": size,
            "_source": self.source(with_vectors=with_vectors),
            # Totals are never used; counting them costs on large indexes.
            "track_total_hits": False,
        }

    # ---- whole bodies

    def lexical(self, request: SearchRequest, size: int) -> Body:
        """A BM25 search body for ``request.text``, ``size`` hits deep.

        Raises:
            EngineConfigError: the store has no ``search.text_fields``.
        """
        if request.text is None:
            raise ValueError("lexical() needs request.text")
        body = self.common(size, with_vectors=request.with_vectors)
        body["query"] = self.filtered(request.filter, self.multi_match(request.text))
        collapse = self.collapse_field
        if collapse:
            # Without a sort, each group keeps its best-scoring document.
            body["collapse"] = {"field": collapse}
        hl = self.highlight()
        if hl is not None:
            body["highlight"] = hl
        return body

    def knn_common(self, request: SearchRequest, size: int) -> Body:
        """The non-kNN part of a vector search body (the dialect adds its kNN clause)."""
        body = self.common(size, with_vectors=request.with_vectors)
        collapse = self.collapse_field
        if collapse:
            body["collapse"] = {"field": collapse}
        return body

    # ---- responses

    def hits(self, response: Mapping[str, Any], *, with_vectors: bool) -> list[Hit]:
        """Hits of a ``_search`` response; scores are the engine's raw ``_score``."""
        out: list[Hit] = []
        vf = self._search.vector_field
        keep_vector_in_source = vf in self._source_fields
        content = self._mapping.content
        for raw in response.get("hits", {}).get("hits", []):
            source = dict(raw.get("_source") or {})
            vector: list[float] | None = None
            if with_vectors and vf:
                value = source.get(vf) if keep_vector_in_source else source.pop(vf, None)
                if isinstance(value, list):
                    vector = [float(x) for x in value]
            highlight: str | None = None
            if content and "highlight" in raw:
                fragments = raw["highlight"].get(content) or []
                highlight = fragments[0] if fragments else None
            score = raw.get("_score")
            index, routing = raw.get("_index"), raw.get("_routing")
            out.append(
                Hit(
                    id=str(raw["_id"]),
                    source=source,
                    score=float(score) if isinstance(score, int | float) else None,
                    vector=vector,
                    highlight=highlight,
                    index=str(index) if index is not None else None,
                    routing=str(routing) if routing is not None else None,
                )
            )
        return out
