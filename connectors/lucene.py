"""The Lucene query DSL that Elasticsearch and OpenSearch both speak, and the connector they share.

Three parts, top to bottom:

- :class:`QueryTranslator`: pure functions from the store's connector spec and an
  engine-level request to a ``_search`` body. No I/O, so unit tests need no engine.
- :func:`fuse_rrf` and the score helpers: hybrid search fuses a lexical and a
  kNN result list in the gateway by weighted reciprocal rank fusion, so it
  works on every engine version and licence (no ``rank``/``retriever``, no
  search pipeline).
- :class:`LuceneConnector`: the engine-neutral async connector. A dialect
  subclass (``connectors.elasticsearch``, ``connectors.opensearch``) supplies
  the client, the kNN clause, the vector mapping and the client's exception
  shapes; everything else lives here once.

Rules the translator keeps:

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

import abc
import asyncio
import copy
import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from connectors.base import (
    ID_FIELD,
    Condition,
    EngineInfo,
    Filter,
    Hit,
    OrderedRequest,
    SearchRequest,
    TimeWindows,
    VectorInfo,
    value_at,
)
from connectors.errors import (
    ConnectorError,
    EngineConfigError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    QueryTooLarge,
)
from connectors.retry import remaining, retry_read

if TYPE_CHECKING:
    from connectors.spec import ConnectorSpec

logger = logging.getLogger(__name__)

T = TypeVar("T")
Body = dict[str, Any]

PAGE_SIZE = 1000
"""Documents per ordered-read request; longer reads page on with ``search_after``."""

MAX_WINDOW = 10_000
"""The engines' default ``index.max_result_window`` and their ceiling for kNN ``k``."""

PIT_KEEP_ALIVE = "1m"
"""A point in time lives for one ordered read only; a minute covers its pages."""

# Field types a sort or filter can use directly (doc values, exact terms).
_EXACT_TYPES = frozenset(
    {
        "keyword",
        "constant_keyword",
        "wildcard",
        "long",
        "integer",
        "short",
        "byte",
        "double",
        "float",
        "half_float",
        "scaled_float",
        "unsigned_long",
        "date",
        "date_nanos",
        "boolean",
        "ip",
    }
)
_SORTABLE_TIME_TYPES = frozenset(
    {"date", "date_nanos", "long", "integer", "unsigned_long", "double", "float", "keyword"}
)
_TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
_TOO_LARGE = frozenset({"too_many_clauses", "too_many_nested_clauses"})
"""Root causes that mean the query itself is too large, whatever the status."""

MAX_PREFIX_QUERY = 1000
"""The longest key prefix the engines match (Lucene's automaton limit, ``max_regex_length``)."""


# --------------------------------------------------------------------------- translator


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


# --------------------------------------------------------------------------- scores and fusion


def normalise_by_max(hits: list[Hit]) -> list[Hit]:
    """BM25 scores have no upper bound: divide by the result's best so the top hit scores 1."""
    top = max((h.score for h in hits if h.score is not None), default=0.0)
    for h in hits:
        h.score = (h.score / top) if (h.score is not None and top > 0) else 0.0
    return hits


def clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def inner_product_score(raw: float) -> float:
    """Map Lucene's max-inner-product score back to a [0, 1] score like cosine's.

    Lucene scores a dot product d as ``d + 1`` when d >= 0 and ``1 / (1 - d)``
    otherwise (always positive, unbounded). Recover d and report ``(1 + d) / 2``,
    exact for unit vectors and clamped for longer ones; the order is preserved.
    """
    dot = raw - 1.0 if raw >= 1.0 else 1.0 - 1.0 / raw if raw > 0 else -1.0
    return clamp01((1.0 + dot) / 2.0)


def fuse_rrf(
    legs: Sequence[tuple[Sequence[Hit], float]],
    *,
    k: int,
    limit: int,
    group_of: Callable[[Hit], Any] | None = None,
) -> list[Hit]:
    """Weighted reciprocal rank fusion of ranked lists, best first, scores in [0, 1].

    A document scores ``sum(weight / (k + rank))`` over the lists it appears in
    (rank from 1), divided by the best possible score ``sum(weights) / (k + 1)``
    (first in every list). Ties keep the order of first appearance. When every
    weight is 0 the lists count equally. With ``group_of``, only the best
    document of each group is kept (collapse across the two lists).
    """
    weights = [w for _, w in legs]
    if not any(w > 0 for w in weights):
        weights = [1.0] * len(legs)
    best = sum(weights) / (k + 1)
    # Keyed by identity, not id: two documents may share an id (routing, aliases).
    Key = tuple[str | None, str | None, str]
    fused: dict[Key, Hit] = {}
    scores: dict[Key, float] = {}
    for (hits, _), weight in zip(legs, weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            ident = hit.identity
            scores[ident] = scores.get(ident, 0.0) + weight / (k + rank)
            merged = fused.get(ident)
            if merged is None:
                fused[ident] = Hit(
                    id=hit.id,
                    source=hit.source,
                    vector=hit.vector,
                    highlight=hit.highlight,
                    index=hit.index,
                    routing=hit.routing,
                )
            else:
                # The same document from the other list: keep what either leg carried.
                merged.highlight = merged.highlight or hit.highlight
                merged.vector = merged.vector or hit.vector
    ranked = sorted(fused.values(), key=lambda h: -scores[h.identity])
    out: list[Hit] = []
    seen_groups: set[Any] = set()
    for hit in ranked:
        if group_of is not None:
            group = group_of(hit)
            if group is not None:
                key = repr(group)
                if key in seen_groups:
                    continue
                seen_groups.add(key)
        hit.score = clamp01(scores[hit.identity] / best)
        out.append(hit)
        if len(out) >= limit:
            break
    return out


# --------------------------------------------------------------------------- mappings


def flatten_mapping(response: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Field path → definition, over every index of a get-mapping response.

    Object fields contribute their children (``a.b``); multi-fields appear as
    ``text.keyword``. An alias over several indices merges them; the first
    index's definition of a field wins.
    """
    out: dict[str, dict[str, Any]] = {}

    def walk(properties: Mapping[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            if not isinstance(spec, Mapping):
                continue
            path = f"{prefix}{name}"
            out.setdefault(path, dict(spec))
            if isinstance(spec.get("properties"), Mapping):
                walk(spec["properties"], f"{path}.")
            for sub, subspec in (spec.get("fields") or {}).items():
                if isinstance(subspec, Mapping):
                    out.setdefault(f"{path}.{sub}", dict(subspec))

    for index in response.values():
        mappings = index.get("mappings") if isinstance(index, Mapping) else None
        if isinstance(mappings, Mapping) and isinstance(mappings.get("properties"), Mapping):
            walk(mappings["properties"], "")
    return out


def keyword_subfields(fields: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """text field → its first keyword sub-field: exact matching and sorting use the sub-field."""
    out: dict[str, str] = {}
    for path, spec in fields.items():
        if spec.get("type") != "text":
            continue
        for sub, subspec in (spec.get("fields") or {}).items():
            if isinstance(subspec, Mapping) and subspec.get("type") == "keyword":
                out[path] = f"{path}.{sub}"
                break
    return out


def text_only_fields(
    fields: Mapping[str, Mapping[str, Any]], exact: Mapping[str, str]
) -> frozenset[str]:
    """Analysed text fields that have no keyword sub-field to filter on exactly."""
    return frozenset(
        path
        for path, spec in fields.items()
        if spec.get("type") in ("text", "match_only_text") and path not in exact
    )


def check_fields(
    spec: ConnectorSpec,
    fields: Mapping[str, Mapping[str, Any]],
    exact: Mapping[str, str],
    *,
    vector_type: str,
) -> dict[str, Any] | None:
    """Check the store's configured fields against the index mapping.

    Returns the vector field's definition (None when the store has no vector field).

    Raises:
        EngineConfigError: a configured field is missing or of an unusable type;
            the message names the config key.
    """
    m, s = spec.fields, spec.search

    def field_type(path: str) -> str | None:
        spec = fields.get(path)
        if spec is None:
            return None
        return str(spec.get("type", "object"))

    for tf in parse_text_fields(s.text_fields):
        if "*" in tf.name:
            continue  # a pattern: the engine expands it; nothing to check by name
        if field_type(tf.name) is None:
            raise EngineConfigError(
                f"search.text_fields: field {tf.name!r} is not in the index mapping"
            )

    def need_exact(key: str, path: str) -> None:
        t = field_type(path)
        if t is None:
            raise EngineConfigError(f"{key}: field {path!r} is not in the index mapping")
        if t not in _EXACT_TYPES and path not in exact:
            raise EngineConfigError(
                f"{key}: field {path!r} is of type {t!r}; it needs a keyword field "
                "(or a text field with a keyword sub-field)"
            )

    if m.created_at:
        t = field_type(m.created_at)
        if t is None:
            raise EngineConfigError(
                f"mapping.created_at: field {m.created_at!r} is not in the index mapping"
            )
        if t not in _SORTABLE_TIME_TYPES:
            raise EngineConfigError(
                f"mapping.created_at: field {m.created_at!r} is of type {t!r}, which cannot be "
                "sorted as a time (use a date field)"
            )
    if m.key:
        need_exact("mapping.key", m.key)
    if m.id != ID_FIELD:
        need_exact("mapping.id", m.id)
    # Scope fields must match exactly: a phrase match on analysed text would let the
    # value 'team-a' admit a document whose ACL says 'team-a-admins'.
    if m.owner:
        need_exact("mapping.owner", m.owner)
    for i, scope_field in enumerate(spec.fields.scope):
        need_exact(f"scope.filters[{i}].field", scope_field)
    if s.collapse_group:
        if not m.group:
            raise EngineConfigError("search.collapse_group needs mapping.group")
        need_exact("mapping.group", m.group)

    if not s.vector_field:
        return None
    vector = fields.get(s.vector_field)
    if vector is None:
        raise EngineConfigError(
            f"search.vector_field: field {s.vector_field!r} is not in the index mapping"
        )
    if vector.get("type") != vector_type:
        raise EngineConfigError(
            f"search.vector_field: field {s.vector_field!r} is of type "
            f"{vector.get('type', 'object')!r}, not {vector_type!r}"
        )
    return dict(vector)


# --------------------------------------------------------------------------- connector


@dataclass(frozen=True, slots=True)
class EngineFailure:
    """A client exception reduced to what the connector decides on."""

    kind: Literal["connection", "timeout", "status"]
    status: int | None = None
    retry_after_ms: int | None = None
    causes: frozenset[str] = frozenset()
    """The error types the engine named (``error.type``, ``root_cause``, ``caused_by``)."""

    @property
    def too_large(self) -> bool:
        return bool(self.causes & _TOO_LARGE)

    @property
    def transient(self) -> bool:
        """Worth retrying: the engine was unreachable or said 'busy'. Timeouts are not
        retried: the deadline is mostly spent by then; nor is a query too large."""
        if self.too_large:
            return False
        return self.kind == "connection" or self.status in _TRANSIENT_STATUS

    def error(self, *, opening: bool = False) -> ConnectorError:
        """The engine-neutral exception; fixed messages, no hosts or credentials."""
        retry_after = self.retry_after_ms if self.retry_after_ms is not None else 1000
        if self.kind == "timeout":
            return EngineTimeout("the engine did not answer in time")
        if self.kind == "connection":
            return EngineUnavailable("the engine cannot be reached", retry_after_ms=retry_after)
        if self.too_large:
            return QueryTooLarge("the engine refused the query as too large")
        status = self.status or 0
        if status == 429:
            return EngineUnavailable("the engine is overloaded", retry_after_ms=retry_after)
        if status >= 500:
            return EngineUnavailable(
                f"the engine failed (HTTP {status})", retry_after_ms=retry_after
            )
        if status == 404:
            return EngineConfigError("index: the index does not exist in the engine")
        if status in (401, 403):
            if opening:
                return EngineConfigError(
                    "connection: the engine refused the credentials, or they lack the "
                    "read and view_index_metadata privileges on the index"
                )
            return EngineRejected(f"the engine refused the credentials (HTTP {status})")
        return EngineRejected(f"the engine rejected the query (HTTP {status})")


def error_causes(body: Any) -> frozenset[str]:
    """The error types in an engine's error body: its type, root causes and causes, nested."""
    out: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, Mapping) or depth > 8:
            return
        if isinstance(node.get("type"), str):
            out.add(node["type"])
        for cause in node.get("root_cause") or []:
            walk(cause, depth + 1)
        walk(node.get("caused_by"), depth + 1)
        for failed in node.get("failed_shards") or []:
            walk(failed.get("reason") if isinstance(failed, Mapping) else None, depth + 1)

    if isinstance(body, Mapping):
        walk(body.get("error"), 0)
    return frozenset(out)


def retry_after_ms(headers: Mapping[str, str] | None) -> int | None:
    """The ``Retry-After`` header (seconds) in milliseconds, when the engine sent one."""
    if not headers:
        return None
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0, int(float(value) * 1000))
            except ValueError:
                return None
    return None


class LuceneConnector(abc.ABC):
    """An Elasticsearch/OpenSearch index behind one store (see :class:`connectors.base.Connector`).

    Subclasses are small dialects: the client, the kNN clause, the vector field
    type and its similarity, the PIT calls and the client's exception shapes.
    """

    engine_name: ClassVar[str]
    vector_type: ClassVar[str]
    engine_id_order: ClassVar[EngineIdOrder] = ES_ENGINE_ID_ORDER

    def __init__(self, spec: ConnectorSpec, *, page_size: int = PAGE_SIZE) -> None:
        """Nothing is contacted until open(); ``page_size`` bounds one ordered-read request."""
        self._spec = spec
        self._page_size = max(1, min(page_size, MAX_WINDOW))
        self._timeout_s = spec.connection.timeout_ms / 1000
        self._client: Any = None
        self._view = False
        self._translator: QueryTranslator | None = None
        self._vector_spec: dict[str, Any] | None = None

    # ---- dialect hooks

    @abc.abstractmethod
    def _make_client(self) -> Any:
        """Build the async client (no I/O).

        Raises:
            EngineConfigError: the connection settings cannot make a client.
        """

    @abc.abstractmethod
    async def _close_client(self, client: Any) -> None: ...

    @abc.abstractmethod
    def _classify(self, exc: BaseException) -> EngineFailure | None:
        """Reduce a client exception; None for anything that is not the client's."""

    @abc.abstractmethod
    async def _search(self, body: Body, seconds: float, *, pit: bool = False) -> dict[str, Any]:
        """Run one ``_search`` (on the index, or on the PIT named in the body)."""

    @abc.abstractmethod
    async def _get_mapping(self, seconds: float) -> dict[str, Any]: ...

    @abc.abstractmethod
    async def _health(self, seconds: float) -> None: ...

    @abc.abstractmethod
    async def _version(self, seconds: float) -> str | None:
        """The engine version, best effort (None when the engine does not say)."""

    @abc.abstractmethod
    async def _open_pit(self, seconds: float) -> str: ...

    @abc.abstractmethod
    async def _close_pit(self, pit_id: str, seconds: float) -> None: ...

    @abc.abstractmethod
    def _knn_body(
        self,
        translator: QueryTranslator,
        request: SearchRequest,
        size: int,
        depth: int,
        *,
        ids_only: bool = False,
    ) -> Body:
        """A kNN search body: ``size`` nearest hits, searching ``depth`` candidates."""

    @abc.abstractmethod
    def _vector_info(self, spec: Mapping[str, Any]) -> VectorInfo:
        """Dimensions and metric of the vector field's mapping.

        Raises:
            EngineConfigError: the field cannot be searched by kNN or its metric is unsupported.
        """

    @abc.abstractmethod
    def _knn_score(self, raw: float) -> float:
        """The engine's kNN ``_score`` for the field's similarity, mapped into [0, 1]."""

    # ---- plumbing

    def _call_timeout(self) -> float:
        """Per-call client timeout: the connection's, cut to what the request deadline leaves.

        Raises:
            EngineTimeout: the deadline has already passed.
        """
        left = remaining(default=self._timeout_s)
        if left <= 0:
            raise EngineTimeout("the engine did not answer in time")
        return min(self._timeout_s, left)

    def _is_transient(self, exc: BaseException) -> bool:
        failure = self._classify(exc)
        return failure is not None and failure.transient

    async def _read(self, call: Callable[[float], Awaitable[T]], *, opening: bool = False) -> T:
        """Run an idempotent read with retries, translating the client's exceptions.

        Raises:
            EngineUnavailable: unreachable, or 429/5xx after retries.
            EngineTimeout: the call or the request deadline timed out.
            EngineRejected: any other 4xx.
            EngineConfigError: the index is missing (404), or refused credentials at open().
        """

        if self._client is None:
            # Closed (or a failed open()): the store must reopen before reading.
            raise EngineUnavailable("the connector is closed", retry_after_ms=1000)

        async def attempt() -> T:
            return await call(self._call_timeout())

        try:
            return await retry_read(
                attempt, transient=self._is_transient, attempts=self._spec.connection.retries
            )
        except ConnectorError:
            raise
        except Exception as exc:
            failure = self._classify(exc)
            if failure is None:
                raise
            # The client's text can hold URLs and index names: debug level only.
            logger.debug("engine call failed: %s", failure, exc_info=True)
            raise failure.error(opening=opening) from exc

    @property
    def _t(self) -> QueryTranslator:
        if self._translator is None:
            raise RuntimeError("the connector is not open")
        return self._translator

    # ---- Connector protocol

    async def open(self) -> EngineInfo:
        """Connect, read the index mapping, check the configured fields against it.

        Raises:
            EngineConfigError: the index or a configured field is missing or unusable
                (the message names the config key), or the credentials were refused.
            EngineUnavailable: the engine cannot be reached.
            EngineTimeout: it did not answer in time.
        """
        if self._client is None:
            self._client = self._make_client()
        try:
            mapping = await self._read(self._get_mapping, opening=True)
            fields = flatten_mapping(mapping)
            if not fields and not mapping:
                raise EngineConfigError("index: the index does not exist in the engine")
            exact = keyword_subfields(fields)
            self._vector_spec = check_fields(
                self._spec, fields, exact, vector_type=self.vector_type
            )
            vectors = self._vector_info(self._vector_spec) if self._vector_spec else None
            self._translator = QueryTranslator(
                self._spec,
                exact_fields=exact,
                text_only_fields=text_only_fields(fields, exact),
                engine_id_order=self.engine_id_order,
            )
            try:
                version = await self._version(self._call_timeout())
            except Exception:  # the version is cosmetic: never fail open() for it
                version = None
        except BaseException:
            await self.close()
            raise
        name = f"{self.engine_name} {version}" if version else self.engine_name
        return EngineInfo(engine=name, vectors=vectors, lexical=bool(self._spec.search.text_fields))

    async def close(self) -> None:
        if self._view:
            return  # a caller's view shares its parent's client; the parent closes it
        client, self._client = self._client, None
        if client is not None:
            await self._close_client(client)

    def for_caller(self, authorization: str) -> LuceneConnector:
        """A view of this open connector whose engine requests carry the caller's
        ``Authorization`` instead of the store's credential (``scope.forward_credential``):
        the engine's own document-level security then decides what the caller sees.
        It shares the client's connection pool and what open() learned; no I/O.

        Raises:
            EngineUnavailable: the connector is not open.
        """
        if self._client is None:
            raise EngineUnavailable("engine connector is closed")
        view = copy.copy(self)
        view._view = True
        view._client = self._client_with_authorization(authorization)
        return view

    def _client_with_authorization(self, authorization: str) -> Any:
        """The dialect's client sending ``authorization`` on every request."""
        raise NotImplementedError

    async def ping(self) -> bool:
        """True when the engine answers HTTP (even a 4xx: it is up); never raises."""
        if self._client is None:
            try:
                self._client = self._make_client()
            except EngineConfigError:
                return False
        try:
            await self._health(min(self._timeout_s, 5.0))
        except Exception as exc:  # ping never raises; classify what the client threw
            failure = self._classify(exc)
            return failure is not None and failure.kind == "status" and (failure.status or 0) < 500
        return True

    async def search(self, request: SearchRequest) -> list[Hit]:
        """Ranked hits, best first, scores in [0, 1]; text + vector are fused by weighted RRF.

        Raises:
            EngineRejected: a sparse vector (Qdrant only) or neither text nor vector.
            EngineConfigError: the store lacks the fields the request needs.
            EngineUnavailable, EngineTimeout: see :meth:`_read`.
        """
        t = self._t
        if request.sparse is not None:
            raise EngineRejected("sparse vectors are not supported by this engine")
        lexical = request.text is not None
        dense = request.dense is not None
        if dense and self._vector_spec is None:
            raise EngineConfigError("search.vector_field: vector search needs a vector field")
        limit = max(0, min(request.limit, MAX_WINDOW))
        if limit == 0:
            return []
        if lexical and dense:
            depth = min(max(request.candidates, limit), MAX_WINDOW)
            legs: list[tuple[Awaitable[list[Hit]], float]] = []
            lw, dw = request.lexical_weight, request.dense_weight
            both = (lw > 0 and dw > 0) or (lw <= 0 and dw <= 0)
            # Legs return ids and scores only: 2 x depth documents would otherwise
            # travel for the `limit` that survive fusion.
            if both or lw > 0:
                legs.append((self._lexical(request, depth, ids_only=True), lw))
            if both or dw > 0:
                legs.append((self._knn(request, depth, depth, ids_only=True), dw))
            results = await _gather([leg for leg, _ in legs])
            group = self._spec.fields.group if t.collapse_field else None
            fused = fuse_rrf(
                [(hits, w) for hits, (_, w) in zip(results, legs, strict=True)],
                k=request.rrf_k,
                limit=limit,
                group_of=(lambda h: value_at(h.source, group)) if group else None,
            )
            return await self._with_documents(
                fused, request.filter, with_vectors=request.with_vectors
            )
        if lexical:
            return await self._lexical(request, limit)
        if dense:
            depth = min(max(request.candidates, limit), MAX_WINDOW)
            return await self._knn(request, limit, depth)
        raise EngineRejected("a search needs query text or a query vector")

    async def _with_documents(
        self, hits: list[Hit], flt: Filter, *, with_vectors: bool
    ) -> list[Hit]:
        """Fill fused hits with their documents in one query under ``flt``; keeps the order."""
        if not hits:
            return hits
        body = self._t.by_ids(hits, flt, with_vectors=with_vectors)
        response = await self._read(lambda seconds: self._search(body, seconds))
        docs = {d.identity: d for d in self._t.hits(response, with_vectors=with_vectors)}
        out: list[Hit] = []
        for h in hits:
            doc = docs.get(h.identity)
            if doc is None:
                continue  # deleted between the two reads
            h.source, h.vector = doc.source, doc.vector
            out.append(h)
        return out

    async def _lexical(
        self, request: SearchRequest, size: int, *, ids_only: bool = False
    ) -> list[Hit]:
        body = self._t.lexical(request, size, ids_only=ids_only)
        response = await self._read(lambda seconds: self._search(body, seconds))
        return normalise_by_max(self._t.hits(response, with_vectors=request.with_vectors))

    async def _knn(
        self, request: SearchRequest, size: int, depth: int, *, ids_only: bool = False
    ) -> list[Hit]:
        body = self._knn_body(self._t, request, size, depth, ids_only=ids_only)
        response = await self._read(lambda seconds: self._search(body, seconds))
        hits = self._t.hits(response, with_vectors=request.with_vectors)
        for h in hits:
            h.score = self._knn_score(h.score) if h.score is not None else 0.0
        return hits

    async def ordered(self, request: OrderedRequest) -> list[Hit]:
        """Hits in (created_at, tie-break) order, newest first when asked, read in pages.

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError: see :meth:`_read`.
        """
        t = self._t
        limit = max(0, request.limit)
        if not t.order.search_after:
            limit = min(limit, MAX_WINDOW)  # `from` paging ends at the result window
        if limit == 0:
            return []
        use_pit = t.order.pit
        pit_id = await self._read(self._open_pit) if use_pit else None
        try:
            hits: list[Hit] = []
            after: list[Any] | None = None
            while len(hits) < limit:
                size = min(self._page_size, limit - len(hits))
                body = t.ordered_page(
                    request,
                    size,
                    search_after=after,
                    offset=0 if t.order.search_after else len(hits),
                    pit_id=pit_id,
                )
                response = await self._read(self._page_call(body, use_pit))
                pit_id = response.get("pit_id", pit_id)
                page = response.get("hits", {}).get("hits", [])
                for h in t.hits(response, with_vectors=request.with_vectors):
                    h.score = None
                    hits.append(h)
                if len(page) < size:
                    break
                if t.order.search_after:
                    after = page[-1]["sort"]
            return hits
        finally:
            if pit_id is not None:
                await self._release_pit(pit_id)

    def _page_call(self, body: Body, pit: bool) -> Callable[[float], Awaitable[dict[str, Any]]]:
        async def call(seconds: float) -> dict[str, Any]:
            return await self._search(body, seconds, pit=pit)

        return call

    async def _release_pit(self, pit_id: str) -> None:
        # Best effort: an unreleased PIT expires after PIT_KEEP_ALIVE anyway.
        try:
            await self._close_pit(pit_id, min(self._timeout_s, 5.0))
        except Exception as exc:
            if self._classify(exc) is None:
                raise
            logger.debug("closing a point in time failed", exc_info=True)

    async def fetch(self, flt: Filter, with_vectors: bool = False) -> Hit | None:
        """The first document matching ``flt`` (the newest when created_at is mapped).

        Raises:
            EngineUnavailable, EngineTimeout, EngineRejected, EngineConfigError: see :meth:`_read`.
        """
        body = self._t.fetch(flt, with_vectors=with_vectors)
        response = await self._read(lambda seconds: self._search(body, seconds))
        hits = self._t.hits(response, with_vectors=with_vectors)
        if not hits:
            return None
        hits[0].score = None
        return hits[0]


async def _gather(calls: Sequence[Awaitable[list[Hit]]]) -> list[list[Hit]]:
    """Run the legs concurrently; on the first failure cancel the others and re-raise it."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
