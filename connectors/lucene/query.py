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

Filter clauses are built in :mod:`connectors.lucene.filters` (this class extends it),
ordered reads and fetches in :mod:`connectors.lucene.order`, hybrid legs planned in
:mod:`connectors.lucene.hybrid`; both build on this class.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connectors.base import Hit, SearchRequest
from connectors.errors import EngineAnswerUnusable, EngineConfigError
from connectors.lucene.failures import NOT_A_HIT, search_hits
from connectors.lucene.filters import Body as Body
from connectors.lucene.filters import FilterTranslator
from connectors.lucene.nested import Anchor, anchors_of, inner_hits_clause
from connectors.lucene.passages import (
    ANALYSED_CHARS,
    fragments_of,
    highlight_clause,
    passages_of,
)

if TYPE_CHECKING:
    from connectors.lucene.spec import LuceneSpec
    from connectors.spec import FieldsSpec, NestedPassageSpec, PassageSpec

PAGE_SIZE = 1000
"""Documents per ordered-read request; longer reads page on with ``search_after``."""

MAX_WINDOW = 10_000
"""The engines' default ``index.max_result_window`` and their ceiling for kNN ``k``."""


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


class QueryTranslator(FilterTranslator):
    """Builds ``_search`` bodies for one store. Pure: spec and requests in, dicts out.

    The kNN clause is the dialect's (its syntax differs between engines); this
    class gives it the filter clauses and the shared parts of the body.
    """

    def __init__(
        self,
        spec: LuceneSpec,
        *,
        exact_fields: Mapping[str, str] | None = None,
        text_only_fields: Collection[str] = (),
        multi_match_type: str = "best_fields",
        highlight_limit_key: str = "max_analyzed_offset",
        analysed_chars: int = ANALYSED_CHARS,
        highlight_query_fields: tuple[str, ...] = (),
    ) -> None:
        """
        Args:
            spec: the store's connector spec.
            exact_fields: text field → keyword sub-field (from the index mapping).
            text_only_fields: analysed text fields with no keyword sub-field.
            multi_match_type: ``best_fields`` unless the store asks otherwise.
            highlight_limit_key: the dialect's name for the highlighter's bound on the
                characters it analyses.
            analysed_chars: that bound, below the index's own
                (:func:`connectors.lucene.passages.analysed_bound`).
            highlight_query_fields: where the passages' text is matched instead of the
                content field, when that one is not indexed.

        Raises:
            EngineConfigError: ``search.text_fields`` is malformed.
        """
        self._spec = spec
        self._mapping = spec.fields
        self._search = spec.search
        super().__init__(exact_fields=exact_fields, text_only_fields=text_only_fields)
        self._text_fields = parse_text_fields(spec.search.text_fields)
        self._multi_match_type = multi_match_type
        self._source_fields = list(spec.fields.read)
        content = spec.fields.content
        self._passages = spec.search.passages if content else None
        self._limit_key = highlight_limit_key
        self._analysed = analysed_chars
        self._highlight_query_fields = highlight_query_fields

    # ---- pieces

    @property
    def fields(self) -> FieldsSpec:
        """The store's fields (what is read, ordered, grouped)."""
        return self._mapping

    @property
    def text_fields(self) -> tuple[TextField, ...]:
        return self._text_fields

    @property
    def passages(self) -> PassageSpec | None:
        """The engine's passages (``search.passages``), when the store has one content field."""
        return self._passages

    @property
    def nested(self) -> NestedPassageSpec | None:
        """The index's nested passages (``search.nested_passages``), the kNN leg's field."""
        return self._search.nested

    def inner_hits(self, request: SearchRequest) -> Body | None:
        """The kNN leg's ``inner_hits`` naming each hit's best nested passage: only with
        the engine's passages for ``request.passage_text`` (else the anchors are unused)."""
        nested = self._search.nested
        if nested is None or self._passages is None or not request.passage_text:
            return None
        return inner_hits_clause(nested)

    @property
    def collapse_field(self) -> str | None:
        """The field results collapse on, when ``search.collapse_group`` is set."""
        if self._search.collapse_group and self._mapping.group:
            return self.exact(self._mapping.group)
        return None

    def source(self, *, with_vectors: bool) -> Body:
        """``_source`` limited to the mapped fields (plus the vector when asked for; a
        document has none of its own when the vectors are its nested passages')."""
        fields = list(self._source_fields)
        vf = self._search.vector_field
        if with_vectors and vf and vf not in fields and self._search.nested is None:
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

    def highlight(self, passage_text: str | None = None) -> Body | None:
        """The highlight clause for the content field: the passages' (``search.passages``,
        :mod:`connectors.lucene.passages`), for ``passage_text`` when given; else a single
        fragment when ``search.highlight`` is on.

        Only a single ``mapping.content`` field can be highlighted (a template
        has no one field to take a fragment of). Tags are empty because the
        fragment becomes the record's plain-text content; markup would corrupt it.
        ``require_field_match: false`` lets a term matched in the title pick the
        best passage of the content too. Both analyse at most the index's bound: a longer
        content is highlighted in its head instead of failing the whole search.
        """
        content = self._mapping.content
        if self._passages is not None and content:
            return highlight_clause(
                content,
                self._passages,
                passage_text,
                self._limit_key,
                self._analysed,
                self._highlight_query_fields,
            )
        if not self._search.highlight or not content:
            return None
        size = self._search.highlight_fragment_size
        return {
            "pre_tags": [""],
            "post_tags": [""],
            "require_field_match": False,
            self._limit_key: self._analysed,
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
        hl = self.highlight(request.passage_text)
        if hl is not None:
            body["highlight"] = hl
        return body

    def knn_common(self, request: SearchRequest, size: int) -> Body:
        """The non-kNN part of a vector search body (the dialect adds its kNN clause);
        it asks for the passages of ``request.passage_text`` where the store has them."""
        body = self.common(size, with_vectors=request.with_vectors)
        collapse = self.collapse_field
        if collapse:
            body["collapse"] = {"field": collapse}
        if self._passages is not None and request.passage_text:
            body["highlight"] = self.highlight(request.passage_text)
        return body

    # ---- responses

    def hits(
        self,
        response: Mapping[str, Any],
        *,
        with_vectors: bool,
        anchors: Mapping[tuple[str | None, str | None, str], tuple[Anchor, ...]] | None = None,
    ) -> list[Hit]:
        """Hits of a ``_search`` response; scores are the engine's raw ``_score``.

        Each hit's anchors are its own ``inner_hits`` (a nested kNN search), else those
        ``anchors`` names for it (the kNN leg's, when the fused page is re-read); the best
        one leads its passages (:func:`connectors.lucene.passages.passages_of`).
        """
        vf = self._search.vector_field
        hits = read_hits(
            response,
            vector_field=vf if with_vectors else None,
            keep_vector_in_source=vf in self._source_fields,
            content=self._mapping.content if self._passages is None else None,
        )
        content, spec, nested = self._mapping.content, self._passages, self._search.nested
        if spec is not None and content:
            raws = search_hits(response)
            given = anchors or {}
            for hit, raw in zip(hits, raws, strict=True):
                if nested is not None:
                    hit.anchors = anchors_of(raw, nested) or given.get(hit.identity, ())
                if hit.source:  # a hybrid leg that reads ids only has no content to cut
                    fragments = fragments_of(raw, content)
                    hit.passages = passages_of(hit.source, content, fragments, spec, hit.anchors)
        return hits


_NUMBER = (int, float)
"""A JSON number (a tuple: ``int | float`` is built anew at each ``isinstance``)."""


def read_hits(
    response: Mapping[str, Any],
    *,
    vector_field: str | None,
    keep_vector_in_source: bool,
    content: str | None,
) -> list[Hit]:
    """Hits of a ``_search`` response; scores are the engine's raw ``_score``.

    Raises:
        EngineAnswerUnusable: the response holds no list of hits, or a hit no engine
            sends (no ``_id``, a ``_source`` or vector that is not one).
    """
    vf = vector_field
    out: list[Hit] = []
    for raw in search_hits(response):
        found = raw.get("_source") if isinstance(raw, dict) and "_id" in raw else NOT_A_HIT
        if not isinstance(found, dict):
            if found is not None:
                raise EngineAnswerUnusable(NOT_A_HIT)
            found = {}
        source = dict(found)
        vector: list[float] | None = None
        if vf:
            value = source.get(vf) if keep_vector_in_source else source.pop(vf, None)
            if isinstance(value, list):
                try:
                    vector = [float(x) for x in value]
                except (TypeError, ValueError):
                    raise EngineAnswerUnusable(NOT_A_HIT) from None
        highlight: str | None = None
        marked = raw.get("highlight") if content else None
        if isinstance(marked, dict):
            fragments = marked.get(content)
            first = fragments[0] if isinstance(fragments, list) and fragments else None
            highlight = first if isinstance(first, str) else None
        score = raw.get("_score")
        index, routing = raw.get("_index"), raw.get("_routing")
        # Positional, in Hit's field order (keywords cost a tenth of a hit's reading).
        out.append(
            Hit(
                str(raw["_id"]),
                source,
                float(score) if isinstance(score, _NUMBER) else None,
                vector,
                highlight,
                str(index) if index is not None else None,
                str(routing) if routing is not None else None,
            )
        )
    return out
