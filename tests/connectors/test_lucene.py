"""Unit tests of the Lucene query translation, fusion and dialect pieces: no engine needed."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from connectors.base import ID_FIELD, Condition, Filter, Hit, OrderedRequest, SearchRequest
from connectors.errors import EngineConfigError, EngineRejected, EngineTimeout, EngineUnavailable
from connectors.fusion import fuse_rrf, inner_product_score, normalise_by_max
from connectors.http_answer import retry_after_ms
from connectors.lucene.connector import LuceneConnector, knn_body
from connectors.lucene.elasticsearch import ElasticsearchDialect
from connectors.lucene.failures import EngineFailure
from connectors.lucene.mapping import check_fields, flatten_mapping, keyword_subfields
from connectors.lucene.opensearch import OpenSearchDialect
from connectors.lucene.order import OrderedBodies
from connectors.lucene.passages import ANALYSED_CHARS
from connectors.lucene.query import QueryTranslator, TextField, parse_text_fields, read_hits
from connectors.spec import ConnectorSpec
from tests.connectors.specs import merged, spec_of


def store(**over: Any) -> ConnectorSpec[Any]:
    """A typical SciFact-like store; keyword args override top-level sections."""
    data: dict[str, Any] = {
        "backend": "elasticsearch",
        "index": "scifact",
        "connection": {"hosts": ["http://127.0.0.1:9200"]},
        "mapping": {
            "id": "doc_id",
            "content": "text",
            "key": "key",
            "group": "group",
            "created_at": "created_at",
            "metadata": ["title"],
        },
        "search": {"text_fields": ["title^2", "text"]},
    }
    return spec_of(merged(data, over))


def walk_keys(node: Any) -> set[str]:
    keys: set[str] = set()
    if isinstance(node, dict):
        for k, v in node.items():
            keys.add(k)
            keys |= walk_keys(v)
    elif isinstance(node, list):
        for v in node:
            keys |= walk_keys(v)
    return keys


# ---- lexical


def test_lexical_is_multi_match_with_boosts() -> None:
    body = QueryTranslator(store()).lexical(SearchRequest(limit=10, text="vitamin D"), 10)
    assert body["query"] == {
        "multi_match": {"query": "vitamin D", "fields": ["title^2", "text"], "type": "best_fields"}
    }
    assert body["size"] == 10
    assert body["track_total_hits"] is False


@pytest.mark.parametrize(
    "text",
    [
        'title:foo AND bar* OR "x"~2 ^3',
        "(a OR b) && !c",
        "text:/.*/",
        '{"query_string": {"query": "*"}}',
    ],
)
def test_caller_text_is_only_a_value(text: str) -> None:
    body = QueryTranslator(store()).lexical(SearchRequest(limit=5, text=text), 5)
    assert body["query"]["multi_match"]["query"] == text
    keys = walk_keys(body)
    assert "query_string" not in keys
    assert "simple_query_string" not in keys
    assert "regexp" not in keys


def test_multi_match_type_can_be_chosen() -> None:
    t = QueryTranslator(store(), multi_match_type="most_fields")
    body = t.lexical(SearchRequest(limit=1, text="x"), 1)
    assert body["query"]["multi_match"]["type"] == "most_fields"


def test_lexical_without_text_fields_is_a_config_error() -> None:
    # text_fields are required by ConnectorSpec for lexical mode; a dense store has none.
    cfg = store(
        search={
            "text_fields": [],
            "mode": "dense",
            "vector_field": "embedding",
            "embedder": {"kind": "local", "model": "m"},
        }
    )
    with pytest.raises(EngineConfigError, match=r"search\.text_fields"):
        QueryTranslator(cfg).lexical(SearchRequest(limit=1, text="x"), 1)


def test_parse_text_fields() -> None:
    assert parse_text_fields(["title^2.5", " text "]) == (
        TextField("title", 2.5),
        TextField("text"),
    )
    assert TextField("title", 2.0).spec == "title^2"
    with pytest.raises(EngineConfigError, match=r"search\.text_fields"):
        parse_text_fields(["title^x"])
    with pytest.raises(EngineConfigError, match=r"search\.text_fields"):
        parse_text_fields(["title^-1"])
    with pytest.raises(EngineConfigError, match=r"search\.text_fields"):
        parse_text_fields(["^2"])


# ---- filters


def test_filters_are_non_scoring() -> None:
    flt = Filter(
        must=(
            Condition("group", ("g1",)),
            Condition("role", ("a", "b")),
            Condition(ID_FIELD, ("1", 2)),
        ),
        key_prefix=("key", "scifact/1"),
    )
    body = QueryTranslator(store()).lexical(SearchRequest(limit=3, text="q", filter=flt), 3)
    assert body["query"] == {
        "bool": {
            "must": [
                {
                    "multi_match": {
                        "query": "q",
                        "fields": ["title^2", "text"],
                        "type": "best_fields",
                    }
                }
            ],
            "filter": [
                {"term": {"group": {"value": "g1"}}},
                {"terms": {"role": ["a", "b"]}},
                {"ids": {"values": ["1", "2"]}},
                {"prefix": {"key": {"value": "scifact/1"}}},
            ],
        }
    }


def test_empty_value_list_matches_nothing() -> None:
    t = QueryTranslator(store())
    assert t.condition(Condition("group", ())) == {"match_none": {}}


def test_text_fields_filter_on_their_keyword_subfield() -> None:
    t = QueryTranslator(store(), exact_fields={"group": "group.raw"})
    flt = Filter(must=(Condition("group", ("g",)),), key_prefix=("group", "g"))
    assert t.filter_clauses(flt) == [
        {"term": {"group.raw": {"value": "g"}}},
        {"prefix": {"group.raw": {"value": "g"}}},
    ]


def test_must_not_leaves_out_exact_values_only() -> None:
    t = QueryTranslator(store(), exact_fields={"title": "title.raw"}, text_only_fields=("content",))
    flt = Filter(
        must=(Condition("group", ("g",)),),
        must_not=(
            Condition("group", ("a", "b")),
            Condition("title", ("T",)),
            Condition(ID_FIELD, ("7",)),
            # Not exact, so never left out (a phrase would leave out more than asked):
            Condition("content", ("x",)),
            Condition("role", ("user",), phrase=True),
            Condition("owner", ()),
        ),
    )
    assert t.filter_clauses(flt) == [
        {"term": {"group": {"value": "g"}}},
        {
            "bool": {
                "must_not": [
                    {"terms": {"group": ["a", "b"]}},
                    {"term": {"title.raw": {"value": "T"}}},
                    {"ids": {"values": ["7"]}},
                ]
            }
        },
    ]
    only_inexact = Filter(must_not=(Condition("content", ("x",)),))
    assert t.filter_clauses(only_inexact) == []


def test_ordered_without_filter_is_match_all() -> None:
    body = OrderedBodies(QueryTranslator(store())).page(OrderedRequest(limit=5), 5)
    assert body["query"] == {"match_all": {}}


# ---- source, collapse, highlight


def test_source_is_limited_to_mapped_fields() -> None:
    t = QueryTranslator(store(search={"vector_field": "embedding"}))
    body = t.lexical(SearchRequest(limit=1, text="x"), 1)
    assert body["_source"] == {
        "includes": ["text", "key", "group", "created_at", "doc_id", "title"]
    }
    with_vec = t.lexical(SearchRequest(limit=1, text="x", with_vectors=True), 1)
    assert with_vec["_source"]["includes"][-1] == "embedding"


def test_collapse_and_highlight() -> None:
    t = QueryTranslator(
        store(search={"collapse_group": True, "highlight": True, "highlight_fragment_size": 120})
    )
    body = t.lexical(SearchRequest(limit=1, text="x"), 1)
    assert body["collapse"] == {"field": "group"}
    assert body["highlight"] == {
        "pre_tags": [""],
        "post_tags": [""],
        "require_field_match": False,
        "max_analyzed_offset": ANALYSED_CHARS,
        "fields": {"text": {"fragment_size": 120, "number_of_fragments": 1}},
    }
    # The index's own bound, where open() read one, is the clause's.
    bounded = QueryTranslator(store(search={"highlight": True}), analysed_chars=4999)
    assert (
        bounded.lexical(SearchRequest(limit=1, text="x"), 1)["highlight"]["max_analyzed_offset"]
        == 4999
    )
    plain = QueryTranslator(store()).lexical(SearchRequest(limit=1, text="x"), 1)
    assert "collapse" not in plain
    assert "highlight" not in plain


def test_no_highlight_for_a_content_template() -> None:
    cfg = store(
        mapping={"content": None, "content_template": "{title}\n\n{text}"},
        search={"highlight": True},
    )
    assert QueryTranslator(cfg).highlight() is None


# ---- ordered reads and fetch


def test_ordered_sorts_on_created_at_then_the_id_field() -> None:
    t = OrderedBodies(QueryTranslator(store()))
    body = t.page(OrderedRequest(limit=2000), 1000)
    assert body["sort"] == [{"created_at": {"order": "desc"}}, {"doc_id": {"order": "desc"}}]
    nxt = t.page(OrderedRequest(limit=2000, newest_first=False), 1000, search_after=[5, "x"])
    assert nxt["sort"] == [{"created_at": {"order": "asc"}}, {"doc_id": {"order": "asc"}}]
    assert nxt["search_after"] == [5, "x"]
    assert "pit" not in nxt
    assert t.plan.pit is False


def test_engine_id_needs_a_pit_and_shard_doc() -> None:
    t = OrderedBodies(QueryTranslator(store(mapping={"id": "_id"})))
    assert t.plan.pit is True
    body = t.page(OrderedRequest(limit=3), 3, pit_id="abc")
    assert body["sort"] == [{"created_at": {"order": "desc"}}, {"_shard_doc": {"order": "desc"}}]
    assert body["pit"] == {"id": "abc", "keep_alive": "1m"}


def test_opensearch_engine_id_pages_by_from_in_a_pit() -> None:
    t = OrderedBodies(
        QueryTranslator(store(mapping={"id": "_id"})), OpenSearchDialect.engine_id_order
    )
    assert (t.plan.pit, t.plan.search_after) == (True, False)
    body = t.page(OrderedRequest(limit=3000), 1000, offset=2000, pit_id="p")
    assert body["sort"] == [{"created_at": {"order": "desc"}}, {"_doc": {"order": "desc"}}]
    assert body["from"] == 2000
    assert "search_after" not in body


def test_without_created_at_the_tiebreak_is_the_order() -> None:
    t = OrderedBodies(QueryTranslator(store(mapping={"created_at": None})))
    body = t.page(OrderedRequest(limit=3, newest_first=False), 3)
    assert body["sort"] == [{"doc_id": {"order": "asc"}}]


def test_fetch_takes_the_newest_match() -> None:
    t = OrderedBodies(QueryTranslator(store()))
    body = t.fetch(Filter(must=(Condition("key", ("scifact/1",)),)))
    assert body["size"] == 1
    assert body["sort"] == [{"created_at": {"order": "desc"}}]
    assert body["query"] == {"bool": {"filter": [{"term": {"key": {"value": "scifact/1"}}}]}}


# ---- responses


def test_hits_carry_highlight_and_vector_without_leaking_it_into_source() -> None:
    t = QueryTranslator(store(search={"vector_field": "embedding", "highlight": True}))
    response = {
        "hits": {
            "hits": [
                {
                    "_id": "7",
                    "_score": 3.5,
                    "_source": {"text": "long", "embedding": [1, 0.5]},
                    "highlight": {"text": ["frag"]},
                },
                {"_id": "8", "_score": None, "_source": {"text": "b"}},
            ]
        }
    }
    hits = t.hits(response, with_vectors=True)
    assert hits[0] == Hit(
        id="7", source={"text": "long"}, score=3.5, vector=[1.0, 0.5], highlight="frag"
    )
    assert hits[1].score is None
    assert hits[1].vector is None


def test_normalise_by_max() -> None:
    hits = normalise_by_max([Hit("a", {}, 8.0), Hit("b", {}, 2.0)])
    assert [h.score for h in hits] == [1.0, 0.25]
    assert normalise_by_max([]) == []


# ---- fusion


def _hits(*ids: str) -> list[Hit]:
    return [Hit(i, {"group": i[0]}) for i in ids]


def test_rrf_scores_and_order() -> None:
    fused = fuse_rrf([(_hits("a", "b", "c"), 1.0), (_hits("b", "d"), 1.0)], k=60, limit=10)
    assert [h.id for h in fused] == ["b", "a", "d", "c"]
    best = 2 / 61
    assert fused[0].score == pytest.approx((1 / 62 + 1 / 61) / best)
    assert fused[1].score == pytest.approx((1 / 61) / best)
    assert all(0 <= (h.score or 0) <= 1 for h in fused)


def test_rrf_first_in_every_list_scores_one() -> None:
    fused = fuse_rrf([(_hits("a"), 0.3), (_hits("a"), 0.7)], k=1, limit=1)
    assert fused[0].score == 1.0


def test_rrf_weights_and_limit() -> None:
    fused = fuse_rrf([(_hits("a"), 0.1), (_hits("b"), 0.9)], k=60, limit=1)
    assert [h.id for h in fused] == ["b"]
    assert fused[0].score == pytest.approx(0.9)


def test_rrf_all_zero_weights_count_equally() -> None:
    fused = fuse_rrf([(_hits("a"), 0.0), (_hits("b"), 0.0)], k=60, limit=2)
    assert [h.id for h in fused] == ["a", "b"]
    assert fused[0].score == pytest.approx(0.5)


def test_rrf_merges_highlight_and_vector() -> None:
    lex = [Hit("a", {}, highlight="frag")]
    dense = [Hit("a", {}, vector=[1.0])]
    (hit,) = fuse_rrf([(lex, 1.0), (dense, 1.0)], k=60, limit=5)
    assert hit.highlight == "frag"
    assert hit.vector == [1.0]


def test_rrf_collapse_keeps_best_of_each_group() -> None:
    fused = fuse_rrf(
        [(_hits("x1", "y1", "x2"), 1.0), (_hits("x2", "y2"), 1.0)],
        k=60,
        limit=10,
        group_of=lambda h: h.source["group"],
    )
    assert [h.id for h in fused] == ["x2", "y1"]


@pytest.mark.parametrize("dot", [-1.0, -0.5, 0.0, 0.25, 1.0])
def test_inner_product_score_recovers_the_dot_product(dot: float) -> None:
    raw = dot + 1 if dot >= 0 else 1 / (1 - dot)
    assert inner_product_score(raw) == pytest.approx((1 + dot) / 2)


def test_inner_product_score_is_monotone_and_bounded() -> None:
    raws = [0.01, 0.2, 0.5, 0.99, 1.0, 1.5, 2.0, 9.0]
    scores = [inner_product_score(r) for r in raws]
    assert scores == sorted(scores)
    assert all(0 <= s <= 1 for s in scores)


# ---- mappings


MAPPING = {
    "scifact-v1": {
        "mappings": {
            "properties": {
                "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
                "text": {"type": "text"},
                "doc_id": {"type": "keyword"},
                "key": {"type": "keyword"},
                "group": {"type": "text", "fields": {"kw": {"type": "keyword"}}},
                "created_at": {"type": "date"},
                "meta": {"properties": {"lang": {"type": "keyword"}}},
                "embedding": {"type": "dense_vector", "dims": 384, "similarity": "cosine"},
            }
        }
    }
}


def test_flatten_mapping_and_keyword_subfields() -> None:
    fields = flatten_mapping(MAPPING)
    assert fields["meta.lang"] == {"type": "keyword"}
    assert fields["title.raw"] == {"type": "keyword"}
    assert keyword_subfields(fields) == {"title": "title.raw", "group": "group.kw"}


def test_check_fields_accepts_the_mapping() -> None:
    fields = flatten_mapping(MAPPING)
    cfg = store(search={"vector_field": "embedding", "collapse_group": True})
    spec = check_fields(cfg, fields, keyword_subfields(fields), vector_type="dense_vector")
    assert spec is not None
    assert spec["dims"] == 384


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"search": {"text_fields": ["title", "abstract"]}}, r"search\.text_fields"),
        ({"mapping": {"created_at": "when"}}, r"mapping\.created_at"),
        ({"mapping": {"created_at": "text"}}, r"mapping\.created_at"),
        ({"mapping": {"key": "text"}}, r"mapping\.key"),
        ({"mapping": {"id": "nope"}}, r"mapping\.id"),
        ({"search": {"vector_field": "vec"}}, r"search\.vector_field"),
        ({"search": {"vector_field": "title"}}, r"search\.vector_field"),
        ({"mapping": {"group": None}, "search": {"collapse_group": True}}, r"collapse_group"),
    ],
)
def test_check_fields_names_the_config_key(over: dict[str, Any], key: str) -> None:
    fields = flatten_mapping(MAPPING)
    with pytest.raises(EngineConfigError, match=key):
        check_fields(store(**over), fields, keyword_subfields(fields), vector_type="dense_vector")


def test_a_text_field_mapped_not_indexed_is_refused_naming_the_key() -> None:
    # The engines refuse any query on it: every search would fail.
    fields = flatten_mapping(MAPPING)
    fields["title"] = {**fields["title"], "index": False}
    with pytest.raises(EngineConfigError, match=r"search\.text_fields: field 'title'"):
        check_fields(store(), fields, keyword_subfields(fields), vector_type="dense_vector")
    fields["title"]["index"] = True  # indexed: accepted (no vector field, so None)
    assert (
        check_fields(store(), fields, keyword_subfields(fields), vector_type="dense_vector") is None
    )


def test_check_fields_skips_patterns() -> None:
    fields = flatten_mapping(MAPPING)
    cfg = store(search={"text_fields": ["tit*"]})
    assert check_fields(cfg, fields, {}, vector_type="dense_vector") is None


# ---- failures


def test_failure_translation() -> None:
    assert isinstance(EngineFailure("timeout").error(), EngineTimeout)
    down = EngineFailure("connection").error()
    assert isinstance(down, EngineUnavailable)
    assert down.retry_after_ms == 1000
    busy = EngineFailure("status", 429, retry_after_ms=2500).error()
    assert isinstance(busy, EngineUnavailable)
    assert busy.retry_after_ms == 2500
    assert isinstance(EngineFailure("status", 500).error(), EngineUnavailable)
    assert isinstance(EngineFailure("status", 400).error(), EngineRejected)
    assert isinstance(EngineFailure("status", 403).error(), EngineRejected)
    assert isinstance(EngineFailure("status", 403).error(opening=True), EngineConfigError)
    assert isinstance(EngineFailure("status", 404).error(), EngineConfigError)


@pytest.mark.parametrize(
    ("failure", "transient"),
    [
        (EngineFailure("connection"), True),
        (EngineFailure("timeout"), False),
        (EngineFailure("status", 429), True),
        (EngineFailure("status", 502), True),
        (EngineFailure("status", 503), True),
        (EngineFailure("status", 504), True),
        (EngineFailure("status", 500), False),
        (EngineFailure("status", 500, causes=frozenset({"node_disconnected_exception"})), True),
        (EngineFailure("status", 400, causes=frozenset({"node_closed_exception"})), False),
        (EngineFailure("status", 400), False),
    ],
)
def test_only_transient_failures_are_retried(failure: EngineFailure, transient: bool) -> None:
    assert failure.transient is transient


def test_retry_after_header() -> None:
    assert retry_after_ms({"Retry-After": "3"}) == 3000
    assert retry_after_ms({"retry-after": "soon"}) is None
    assert retry_after_ms(None) is None


def test_es_classifies_client_exceptions() -> None:
    from elastic_transport import ApiResponseMeta, ConnectionTimeout, HttpHeaders, NodeConfig
    from elastic_transport import ConnectionError as TransportConnectionError
    from elasticsearch import ApiError

    es = ElasticsearchDialect()
    meta = ApiResponseMeta(
        status=429,
        http_version="1.1",
        headers=HttpHeaders({"Retry-After": "2"}),
        duration=0.0,
        node=NodeConfig("http", "10.0.0.1", 9200),
    )
    assert es.classify(ApiError("busy", meta, {})) == EngineFailure("status", 429, 2000)
    assert es.classify(ConnectionTimeout("t")) == EngineFailure("timeout")
    assert es.classify(TransportConnectionError("c")) == EngineFailure("connection")
    assert es.classify(ValueError("x")) is None


def test_os_classifies_client_exceptions() -> None:
    from opensearchpy.exceptions import ConnectionError as OSConnectionError
    from opensearchpy.exceptions import ConnectionTimeout, TransportError

    os_ = OpenSearchDialect()
    assert os_.classify(ConnectionTimeout("TIMEOUT", "t", None)) == EngineFailure("timeout")
    assert os_.classify(OSConnectionError("N/A", "c", None)) == EngineFailure("connection")
    assert os_.classify(TransportError(503, "x", {})) == EngineFailure("status", 503)
    assert os_.classify(KeyError("x")) is None


# ---- dialects


def dense_store(backend: str) -> ConnectorSpec[Any]:
    return store(
        backend=backend,
        search={
            "mode": "hybrid",
            "vector_field": "embedding",
            "embedder": {"kind": "local", "model": "m"},
        },
    )


def test_es_knn_is_top_level_with_filter() -> None:
    cfg = dense_store("elasticsearch")
    flt = Filter(must=(Condition("group", ("g",)),))
    request = SearchRequest(limit=10, dense=[0.5, 0.5], filter=flt)
    body = knn_body(ElasticsearchDialect(), QueryTranslator(cfg), "embedding", request, 10, 100)
    assert body["knn"] == {
        "field": "embedding",
        "query_vector": [0.5, 0.5],
        "k": 100,  # the depth, like OpenSearch's k; size cuts to the limit
        "num_candidates": 100,
        "filter": [{"term": {"group": {"value": "g"}}}],
    }
    assert body["size"] == 10
    assert "query" not in body


def test_os_knn_is_a_query_with_filter() -> None:
    cfg = dense_store("opensearch")
    flt = Filter(key_prefix=("key", "scifact/"))
    request = SearchRequest(limit=10, dense=[0.5, 0.5], filter=flt)
    body = knn_body(OpenSearchDialect(), QueryTranslator(cfg), "embedding", request, 10, 100)
    assert body["query"] == {
        "knn": {
            "embedding": {
                "vector": [0.5, 0.5],
                "k": 100,
                "filter": {"bool": {"filter": [{"prefix": {"key": {"value": "scifact/"}}}]}},
            }
        }
    }
    assert body["size"] == 10


@pytest.mark.parametrize(
    ("similarity", "metric"),
    [
        ("cosine", "cosine"),
        ("dot_product", "dot"),
        ("max_inner_product", "dot"),
        ("l2_norm", "l2"),
        (None, "cosine"),
    ],
)
def test_es_vector_info(similarity: str | None, metric: str) -> None:
    es = ElasticsearchDialect()
    spec: dict[str, Any] = {"type": "dense_vector", "dims": 384}
    if similarity:
        spec["similarity"] = similarity
    info, _ = es.vector_scoring(spec)
    assert (info.dimensions, info.metric, info.metrics) == (384, metric, ("cosine", "dot", "l2"))


def test_es_vector_info_refuses_unindexed_and_unknown() -> None:
    es = ElasticsearchDialect()
    with pytest.raises(EngineConfigError, match=r"search\.vector_field"):
        es.vector_scoring({"type": "dense_vector", "dims": 3, "index": False})
    with pytest.raises(EngineConfigError, match=r"search\.vector_field"):
        es.vector_scoring({"type": "dense_vector", "dims": 3, "similarity": "hamming"})


@pytest.mark.parametrize(
    ("spec", "metric"),
    [
        ({"method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}, "cosine"),
        ({"space_type": "innerproduct"}, "dot"),
        ({}, "l2"),
    ],
)
def test_os_vector_info(spec: dict[str, Any], metric: str) -> None:
    os_ = OpenSearchDialect()
    info, _ = os_.vector_scoring({"type": "knn_vector", "dimension": 384, **spec})
    assert (info.dimensions, info.metric) == (384, metric)


def test_os_vector_info_refuses_models_and_other_spaces() -> None:
    os_ = OpenSearchDialect()
    with pytest.raises(EngineConfigError, match=r"search\.vector_field"):
        os_.vector_scoring({"type": "knn_vector", "model_id": "m"})
    with pytest.raises(EngineConfigError, match=r"search\.vector_field"):
        os_.vector_scoring({"type": "knn_vector", "dimension": 8, "space_type": "l1"})


async def test_bad_hosts_are_a_config_error_without_the_host() -> None:
    cfg = store(connection={"hosts": ["secret-host.internal"]})
    with pytest.raises(EngineConfigError, match=r"connection\.hosts") as info:
        await ElasticsearchDialect().make_client(cfg)
    assert "secret-host" not in str(info.value)


async def test_opensearch_refuses_cloud_id() -> None:
    cfg = store(backend="opensearch", connection={"hosts": [], "cloud_id": "x:y"})
    with pytest.raises(EngineConfigError, match=r"connection\.cloud_id"):
        await OpenSearchDialect().make_client(cfg)


def _sigv4_store() -> ConnectorSpec[Any]:
    return store(
        backend="opensearch",
        connection={"hosts": ["http://127.0.0.1:9200"], "aws_sigv4": {"region": "eu-west-1"}},
    )


async def test_aws_credential_lookup_runs_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The chain can block on the instance metadata service: it must not run in the loop.
    from types import SimpleNamespace

    import connectors.lucene.opensearch as opensearch

    loop_thread = threading.get_ident()
    lookups: list[int] = []

    def lookup() -> Any:
        lookups.append(threading.get_ident())
        return SimpleNamespace(access_key="AKIDEXAMPLE", secret_key="s", token=None)

    monkeypatch.setattr(opensearch, "aws_credentials", lookup)
    client = await OpenSearchDialect().make_client(_sigv4_store())
    try:
        assert len(lookups) == 1
        assert lookups[0] != loop_thread
    finally:
        await client.close()


async def test_no_aws_credentials_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import connectors.lucene.opensearch as opensearch

    monkeypatch.setattr(opensearch, "aws_credentials", lambda: None)
    with pytest.raises(EngineConfigError, match=r"connection\.aws_sigv4"):
        await OpenSearchDialect().make_client(_sigv4_store())


async def test_search_before_open_is_a_bug() -> None:
    with pytest.raises(RuntimeError):
        await LuceneConnector(store()).search(SearchRequest(limit=1, text="x"))


def test_text_only_field_is_matched_as_phrases_not_terms() -> None:
    from connectors.lucene.mapping import text_only_fields

    fields: dict[str, dict[str, Any]] = {
        "title": {"type": "text"},
        "body": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "body.raw": {"type": "keyword"},
        "tag": {"type": "keyword"},
    }
    exact = {"body": "body.raw"}
    assert text_only_fields(fields, exact) == {"title"}
    t = QueryTranslator(store(), exact_fields=exact, text_only_fields={"title"})
    assert t.condition(Condition("title", ("A B",))) == {"match_phrase": {"title": "A B"}}
    assert t.condition(Condition("body", ("A B",))) == {"term": {"body.raw": {"value": "A B"}}}
    assert t.condition(Condition("tag", ("x", "y"))) == {"terms": {"tag": ["x", "y"]}}


def test_fusion_keeps_documents_that_share_an_id_apart() -> None:
    a, b = Hit("r1", {}, index="i", routing="A"), Hit("r1", {}, index="i", routing="B")
    fused = fuse_rrf([([a], 1.0), ([b, Hit("r1", {}, index="i", routing="A")], 1.0)], k=60, limit=5)
    assert [(h.id, h.routing) for h in fused] == [("r1", "A"), ("r1", "B")]
    assert fused[0].score == pytest.approx((1 / 61 + 1 / 62) / (2 / 61))


def test_read_hits_puts_each_part_of_an_engine_hit_in_its_own_field() -> None:
    raw = {
        "_id": 7,
        "_index": "docs-2",
        "_routing": "r1",
        "_score": 3,
        "_source": {"body": "b", "emb": [1, 2]},
        "highlight": {"body": ["<em>b</em>"]},
    }
    (hit,) = read_hits(
        {"hits": {"hits": [raw]}}, vector_field="emb", keep_vector_in_source=False, content="body"
    )
    assert hit == Hit(
        id="7",
        source={"body": "b"},
        score=3.0,
        vector=[1.0, 2.0],
        highlight="<em>b</em>",
        index="docs-2",
        routing="r1",
    )
    assert raw["_source"] == {"body": "b", "emb": [1, 2]}  # the answer itself is left as it was
