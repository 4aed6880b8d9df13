"""The Lucene connector over a fake transport at the engine I/O seam (no socket).

:class:`connectors.engine_transport.MockTransport` stands where the socket pool
stands beneath both official clients; these tests drive the whole connector (open,
search, the errors of an unusable answer) through it, for both engines. The same
answer forms over real sockets are tested in test_answer_forms.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from connectors.base import SearchRequest
from connectors.engine_transport import EngineRequest, MockTransport, Response, json_response
from connectors.errors import ConnectorError, EngineAnswerUnusable, EngineConfigError
from connectors.lucene.connector import LuceneConnector
from connectors.lucene.passages import ANALYSED_CHARS, ANALYSED_SETTING
from connectors.lucene.spec import LuceneConnectionSpec, LuceneSpec
from connectors.spec import ConnectorSpec, FieldsSpec, PassageSpec, SearchSpec

ENGINES = ("elasticsearch", "opensearch")
PRODUCT = {"x-elastic-product": "Elasticsearch"}
MAPPING = {"idx": {"mappings": {"properties": {"title": {"type": "text"}}}}}
HITS = {
    "took": 1,
    "hits": {
        "total": {"value": 2, "relation": "eq"},
        "hits": [
            {"_id": "a", "_score": 2.0, "_source": {"title": "first"}},
            {"_id": "b", "_score": 1.0, "_source": {"title": "second"}},
        ],
    },
}


def _spec(backend: str) -> LuceneSpec:
    return ConnectorSpec(
        backend=backend,
        index="idx",
        connection=LuceneConnectionSpec(hosts=("http://engine.test:9200",), retries=0),
        fields=FieldsSpec(read=("title",), content="title"),
        search=SearchSpec(mode="lexical", text_fields=("title",)),
    )


def _engine(
    backend: str,
    search: Callable[[EngineRequest], Response],
    paths: dict[str, Response] | None = None,
) -> MockTransport:
    """An engine that knows one index; ``search`` answers its ``_search``, ``paths`` the
    paths they name."""
    headers = PRODUCT if backend == "elasticsearch" else {}

    def handler(request: EngineRequest) -> Response:
        if paths and request.path in paths:
            return paths[request.path]
        if request.path == "/idx/_mapping":
            return json_response(MAPPING, headers=headers)
        if request.path == "/idx/_search":
            return search(request)
        if request.path == "/":
            return json_response({"version": {"number": "2.19.0"}}, headers=headers)
        if request.path.startswith("/_nodes/"):
            return json_response({"nodes": {"n": {"version": "8.19.0"}}}, headers=headers)
        return json_response({"error": "no such path"}, 404, headers)

    return MockTransport(handler)


@pytest.mark.parametrize("backend", ENGINES)
async def test_a_search_goes_through_the_transport_and_back(backend: str) -> None:
    headers = PRODUCT if backend == "elasticsearch" else {}
    engine = _engine(backend, lambda request: json_response(HITS, headers=headers))
    connector = LuceneConnector(_spec(backend), transport=engine)
    info = await connector.open()
    hits = await connector.search(SearchRequest(limit=2, text="first"))
    await connector.close()
    assert info.engine.startswith(backend)
    assert [h.id for h in hits] == ["a", "b"]
    sent = [r for r in engine.requests if r.path == "/idx/_search"]
    assert len(sent) == 1
    body: Any = sent[0].json()
    assert body["size"] == 2
    assert "first" in str(body["query"])
    assert engine.node == "engine.test:9200"


@pytest.mark.parametrize("backend", ENGINES)
async def test_a_login_page_is_a_connector_error_saying_what_came_back(backend: str) -> None:
    page = Response(200, {"content-type": "text/html"}, b"<html>sign in</html>")
    engine = _engine(backend, lambda request: page)
    connector = LuceneConnector(_spec(backend), transport=engine)
    await connector.open()
    with pytest.raises(ConnectorError) as caught:
        await connector.search(SearchRequest(limit=2, text="first"))
    await connector.close()
    assert "text/html" in str(caught.value)


@pytest.mark.parametrize("backend", ENGINES)
async def test_a_missing_index_is_a_config_error(backend: str) -> None:
    headers = PRODUCT if backend == "elasticsearch" else {}

    def handler(request: EngineRequest) -> Response:
        missing = {"error": {"type": "index_not_found_exception"}, "status": 404}
        return json_response(missing, 404, headers)

    connector = LuceneConnector(_spec(backend), transport=MockTransport(handler))
    with pytest.raises(EngineConfigError):
        await connector.open()


async def test_a_handler_may_be_a_coroutine_and_head_answers_carry_no_body() -> None:
    async def handler(request: EngineRequest) -> Response:
        return json_response({"ok": True})

    engine = MockTransport(handler)
    answer = await engine.request(b"HEAD /idx HTTP/1.1\r\nhost: x\r\n\r\n", 1.0, head_only=True)
    assert (answer.status, answer.body) == (200, b"")
    assert engine.requests[0].method == "HEAD"
    assert engine.requests[0].headers == {"host": "x"}


@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize(
    ("settings", "bound"),
    [
        (json_response({"idx": {"settings": {ANALYSED_SETTING: "5000"}}}), 4999),
        # Settings the credential may not read, or a proxy's page: the engines' default.
        (json_response({"error": {"type": "security_exception"}}, 403), ANALYSED_CHARS),
        (Response(200, {"content-type": "text/html"}, b"<html>sign in</html>"), ANALYSED_CHARS),
    ],
)
async def test_open_reads_the_indexs_highlight_bound_for_passages(
    backend: str, settings: Response, bound: int
) -> None:
    headers = PRODUCT if backend == "elasticsearch" else {}
    answer = Response(settings.status, {**settings.headers, **headers}, settings.body)
    paths = {f"/idx/_settings/{ANALYSED_SETTING}": answer}
    engine = _engine(backend, lambda request: json_response(HITS, headers=headers), paths)
    spec = _spec(backend)
    search = SearchSpec(
        mode="lexical",
        text_fields=("title",),
        passages=PassageSpec(max_chars=10, count=2, fragment_chars=5),
    )
    connector = LuceneConnector(replace(spec, search=search), transport=engine)
    await connector.open()
    await connector.search(SearchRequest(limit=2, text="first", passage_text="first"))
    await connector.close()
    body: Any = next(r for r in engine.requests if r.path == "/idx/_search").json()
    key = "max_analyzed_offset" if backend == "elasticsearch" else "max_analyzer_offset"
    assert body["highlight"][key] == bound


@pytest.mark.parametrize("backend", ENGINES)
async def test_passages_match_on_the_text_fields_where_the_content_is_not_indexed(
    backend: str,
) -> None:
    headers = PRODUCT if backend == "elasticsearch" else {}
    properties = {"title": {"type": "text"}, "body": {"type": "text", "index": False}}
    mapping = json_response({"idx": {"mappings": {"properties": properties}}}, headers=headers)
    paths = {"/idx/_mapping": mapping}
    engine = _engine(backend, lambda request: json_response(HITS, headers=headers), paths)
    spec = _spec(backend)
    passages = PassageSpec(max_chars=10, count=2, fragment_chars=5)
    search = SearchSpec(mode="lexical", text_fields=("title",), passages=passages)
    fields = FieldsSpec(read=("title", "body"), content="body")
    connector = LuceneConnector(replace(spec, search=search, fields=fields), transport=engine)
    await connector.open()
    await connector.search(SearchRequest(limit=2, text="first", passage_text="the first"))
    await connector.close()
    body: Any = next(r for r in engine.requests if r.path == "/idx/_search").json()
    query = {"multi_match": {"query": "the first", "fields": ["title"]}}
    assert body["highlight"]["highlight_query"] == query
    assert "body" in body["highlight"]["fields"]
    # With no text field either, nothing can give the highlighter its terms: refused at open.
    bare = replace(spec, search=replace(search, text_fields=()), fields=fields)
    with pytest.raises(EngineConfigError, match=r"search\.passages"):
        await LuceneConnector(bare, transport=engine).open()


@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({}, "no list of hits"),
        ({"hits": None}, "no list of hits"),
        ({"hits": {"hits": "x"}}, "no list of hits"),
        ([1, 2], "not an object"),
        ({"hits": {"hits": [{"_source": {"title": "t"}}]}}, "a hit without an _id"),
        ({"hits": {"hits": ["x"]}}, "a hit without an _id"),
        ({"hits": {"hits": [{"_id": "a", "_source": "x"}]}}, "a _source that is not"),
    ],
)
async def test_json_that_is_not_a_search_answer_is_unusable_and_says_so(
    backend: str, answer: Any, says: str
) -> None:
    # A proxy or another service answering JSON of its own: an engine error saying what
    # came back, never a crash in the connector.
    headers = PRODUCT if backend == "elasticsearch" else {}
    engine = _engine(backend, lambda request: json_response(answer, headers=headers))
    connector = LuceneConnector(_spec(backend), transport=engine)
    await connector.open()
    with pytest.raises(EngineAnswerUnusable, match=says):
        await connector.search(SearchRequest(limit=2, text="first"))
    await connector.close()
