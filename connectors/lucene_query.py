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
- Ordered reads sort on ``mapping.created_at`` and break ties on a unique key
  (see :class:`OrderPlan`), paging with ``search_after``.
- Every body carries the request's filter, which holds the caller's scope:
  searches, kNN legs, ordered pages, fetches and the hybrid re-read alike.
- Hybrid legs fetch ids and scores only (``candidates`` deep each); the fused
  top hits' documents come in one query that names each hit by index, routing
  and id (an ``_id`` is unique only within one index and routing value) and
  still carries the filter.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connectors.base import (
    ID_FIELD,
    Condition,
    Filter,
    Hit,
    OrderedRequest,
    SearchRequest,
    TimeWindows,
)
from connectors.errors import EngineConfigError, QueryTooLarge

if TYPE_CHECKING:
    from connectors.spec import ConnectorSpec

Body = dict[str, Any]

PAGE_SIZE = 1000
"""Documents per ordered-read request; longer reads page on with ``search_after``."""

MAX_WINDOW = 10_000
"""The engines' default ``index.max_result_window`` and their ceiling for kNN ``k``."""

PIT_KEEP_ALIVE = "1m"
"""A point in time lives for one ordered read only; a minute covers its pages."""


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


@dataclass(frozen=True, slots=True)
class EngineIdOrder:
    """A dialect's tie-break for stores whose record id is the engine's ``_id``.

    ``_id`` itself cannot be sorted on without fielddata (off in Elasticsearch
    8, deprecated with a warning per request in OpenSearch), so the read runs in
    a point in time and breaks ties on a per-document sort key of the engine.
    """

    tiebreak: str
    search_after: bool
    """True when the key is unique across shards (Elasticsearch's ``_shard_doc``);
    False when it is only unique within a shard (OpenSearch's ``_doc``), where
    pages are taken by ``from`` inside the PIT instead (see :class:`OrderPlan`)."""


ES_ENGINE_ID_ORDER = EngineIdOrder("_shard_doc", search_after=True)


@dataclass(frozen=True, slots=True)
class OrderPlan:
    """How ordered reads sort: ``primary`` (created_at, or None) then a unique ``tiebreak``.

    The tie-break makes the order total, which ``search_after`` paging needs: a
    page boundary inside a run of equal timestamps must neither skip nor repeat
    documents. It is ``mapping.id`` when that is a source field (unique by the
    mapping's contract). With the engine's own ``_id`` as the record id the read
    runs in a point in time (``pit``), see :class:`EngineIdOrder`:

    - Elasticsearch breaks ties on ``_shard_doc``, unique across shards in a PIT.
    - OpenSearch (2.x has no ``_shard_doc``) sorts on ``_doc``, unique only per
      shard: ``search_after`` on it could skip a tie on another shard, so pages
      are taken with ``from``. Inside one PIT the shards' merge order is fixed
      (ties go by shard, then document), so ``from`` pages are consistent; they
      reach ``MAX_WINDOW`` (``index.max_result_window``) documents, the most a
      store's limits allow.

    Without created_at the tie-break alone is the order: the id ascending, or
    index order (roughly insertion order), stable while the index is unchanged.
    """

    primary: str | None
    tiebreak: str
    pit: bool
    search_after: bool = True


def _any_of(clauses: list[Body]) -> Body:
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
        engine_id_order: EngineIdOrder = ES_ENGINE_ID_ORDER,
        multi_match_type: str = "best_fields",
    ) -> None:
        """
        Args:
            spec: the store's connector spec.
            exact_fields: text field → keyword sub-field (from the index mapping).
            text_only_fields: analysed text fields with no keyword sub-field.
            engine_id_order: the dialect's tie-break when ``mapping.id`` is the engine id.
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
        m = spec.fields
        if m.id != ID_FIELD:
            self.order = OrderPlan(
                primary=self.exact(m.created_at) if m.created_at else None,
                tiebreak=self.exact(m.id),
                pit=False,
            )
        else:
            self.order = OrderPlan(
                primary=self.exact(m.created_at) if m.created_at else None,
                tiebreak=engine_id_order.tiebreak,
                pit=True,
                search_after=engine_id_order.search_after,
            )

    # ---- pieces

    def exact(self, field: str) -> str:
        """The field to filter/sort/collapse on for ``field`` (its keyword sub-field if text)."""
        return self._exact.get(field, field)

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
            return _any_of([{"match_phrase": {cond.field: str(v)}} for v in cond.values])
        field = self.exact(cond.field)
        if len(cond.values) == 1:
            return {"term": {field: {"value": cond.values[0]}}}
        return {"terms": {field: list(cond.values)}}

    def time_windows(self, times: TimeWindows) -> Body:
        """A date field inside any of the windows (ISO 8601 values, whatever the field format)."""
        field = self.exact(times.field)
        return _any_of(
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

    def _leg_source(self) -> Body | bool:
        """A hybrid leg's ``_source``: none, or only the group when results collapse."""
        if self.collapse_field and self._mapping.group:
            return {"includes": [self._mapping.group]}
        return False

    def _common(self, size: int, *, with_vectors: bool, ids_only: bool = False) -> Body:
        return {
            "size": size,
            "_source": self._leg_source() if ids_only else self.source(with_vectors=with_vectors),
            # Totals are never used; counting them costs on large indexes.
            "track_total_hits": False,
        }

    # ---- whole bodies

    def lexical(self, request: SearchRequest, size: int, *, ids_only: bool = False) -> Body:
        """A BM25 search body for ``request.text``, ``size`` hits deep.

        ``ids_only`` is for a hybrid leg: ids and scores only, the documents are
        read for the fused top hits alone (see :meth:`by_ids`).

        Raises:
            EngineConfigError: the store has no ``search.text_fields``.
        """
        if request.text is None:
            raise ValueError("lexical() needs request.text")
        body = self._common(size, with_vectors=request.with_vectors, ids_only=ids_only)
        body["query"] = self.filtered(request.filter, self.multi_match(request.text))
        collapse = self.collapse_field
        if collapse:
            # Without a sort, each group keeps its best-scoring document.
            body["collapse"] = {"field": collapse}
        hl = self.highlight()
        if hl is not None:
            body["highlight"] = hl
        return body

    def knn_common(self, request: SearchRequest, size: int, *, ids_only: bool = False) -> Body:
        """The non-kNN part of a vector search body (the dialect adds its kNN clause)."""
        body = self._common(size, with_vectors=request.with_vectors, ids_only=ids_only)
        collapse = self.collapse_field
        if collapse:
            body["collapse"] = {"field": collapse}
        return body

    def sort(self, *, descending: bool) -> list[Body]:
        """The total order of ordered reads (see :class:`OrderPlan`)."""
        order = "desc" if descending else "asc"
        keys = [self.order.primary] if self.order.primary else []
        keys.append(self.order.tiebreak)
        return [{key: {"order": order}} for key in keys]

    def ordered_page(
        self,
        request: OrderedRequest,
        size: int,
        *,
        search_after: Sequence[Any] | None = None,
        offset: int = 0,
        pit_id: str | None = None,
    ) -> Body:
        """One page of an ordered read: after the previous page's last ``sort``
        values, or at ``offset`` when the plan pages by ``from``."""
        body = self._common(size, with_vectors=request.with_vectors)
        body["query"] = self.filtered(request.filter)
        body["sort"] = self.sort(descending=request.newest_first)
        if search_after is not None:
            body["search_after"] = list(search_after)
        if offset:
            body["from"] = offset
        if pit_id is not None:
            body["pit"] = {"id": pit_id, "keep_alive": PIT_KEEP_ALIVE}
        return body

    def fetch(self, flt: Filter, *, with_vectors: bool = False) -> Body:
        """The first document matching ``flt``: the newest one when created_at is mapped."""
        body = self._common(1, with_vectors=with_vectors)
        body["query"] = self.filtered(flt)
        if self.order.primary:
            body["sort"] = [{self.order.primary: {"order": "desc"}}]
        return body

    def by_ids(self, hits: Sequence[Hit], flt: Filter, *, with_vectors: bool) -> Body:
        """The documents of the fused top hits of a hybrid search, under the request's filter.

        Each hit is named by its index, routing and id: the same ``_id`` can be held
        once per routing value, and once per index behind an alias, by documents of
        different tenants. The filter (which carries the caller's scope) is applied
        again, so the re-read can never return what the legs could not.
        """
        body = self._common(len(hits), with_vectors=with_vectors)
        body["query"] = {"bool": {"filter": [*self.filter_clauses(flt), self.located(hits)]}}
        return body

    def located(self, hits: Sequence[Hit]) -> Body:
        """A clause matching exactly the documents the hits name (index, routing, id).

        One clause per (index, routing) pair, holding that pair's ids: a handful
        of clauses however many hits, far below the engines' clause limits.
        """
        groups: dict[tuple[str | None, str | None], list[str]] = {}
        for h in hits:
            groups.setdefault((h.index, h.routing), []).append(h.id)
        clauses: list[Body] = []
        for (index, routing), ids in groups.items():
            parts: list[Body] = [{"ids": {"values": ids}}]
            if index is not None:
                parts.append({"term": {"_index": index}})
            if routing is not None:
                parts.append({"term": {"_routing": routing}})
            else:
                parts.append({"bool": {"must_not": [{"exists": {"field": "_routing"}}]}})
            clauses.append({"bool": {"filter": parts}})
        return _any_of(clauses)

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
