"""Bad input over HTTP and stdio: the right error code or a clean answer, never a crash.

Every reply must be timely (the clients time out every call), never a 5xx, and
carry no traceback, file path or host name; each test asserts the code it expects.
(That every code is canonical holds by construction: tests/gateway/test_jsonrpc.py.)
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import orjson
import pytest

from tests.conformance.conftest import (
    ENVELOPE,
    A2MClient,
    HttpClient,
    Reply,
    StdioClient,
    assert_scores,
    max_body_bytes,
)

pytestmark = pytest.mark.integration

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

_LEAKS = [
    re.compile(r"Traceback"),
    re.compile(r'File "[^"]+", line \d+'),
    re.compile(r"(?:/[\w.-]+){2,}\.py\b"),
    re.compile(r"site-packages|dist-packages"),
    re.compile(r"/work/|/root/|/home/|/tmp/"),
    re.compile(r"pydantic|errors\.pydantic\.dev|Input should be|validation error for"),
    re.compile(r"qdrant_client|orjson\.|JSONDecodeError|UnexpectedResponse"),
    # The Elasticsearch / OpenSearch clients' exceptions, and engine addresses.
    re.compile(r"elastic_transport|opensearchpy|ApiError|TransportError|_exception\b"),
    re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}:\d{2,5}\b|https?://(?:localhost|127\.)"),
]
_HOST = socket.gethostname()


def assert_clean(reply: Reply) -> dict[str, Any] | None:
    """No 5xx, JSON-RPC where JSON-RPC is due, nothing leaked.

    Returns the JSON-RPC response object when there is one.
    """
    if reply.status is not None:
        assert reply.status < 500, f"HTTP {reply.status}: {reply.body[:300]!r}"
    if reply.empty:
        if reply.status is not None:
            assert reply.status in (202, 405, 413, 415), reply.status
        return None
    text = reply.body.decode("utf-8", errors="replace")
    obj = reply.json()
    if reply.status not in (None, 200, 400):
        # Transport-level refusals (403/404/405/413/415) are plain documents.
        assert isinstance(obj, dict)
        for leak in _LEAKS:
            assert not leak.search(text), f"{leak.pattern!r} in {text[:300]!r}"
        return None
    assert isinstance(obj, dict), f"not a response object: {text[:200]}"
    assert obj.get("jsonrpc") == "2.0"
    if "error" in obj:
        err = obj["error"]
        assert isinstance(err["message"], str)
        assert len(err["message"]) < 2000, "an error message echoes the input"
        for leak in _LEAKS:
            assert not leak.search(text), f"{leak.pattern!r} in {text[:300]!r}"
        if len(_HOST) >= 4:
            assert not re.search(rf"\b{re.escape(_HOST)}\b", text), "host name on the wire"
    else:
        assert "result" in obj
    return dict(obj)


def send(client: A2MClient, raw: bytes) -> dict[str, Any] | None:
    return assert_clean(client.send(raw))


def rpc(method: str, params: Any, request_id: Any = 1) -> bytes:
    # The standard library, not orjson: it writes integers beyond 64 bits as they are.
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def code_of(client: A2MClient, raw: bytes) -> int | None:
    """The error code, or None for a result."""
    obj = send(client, raw)
    assert obj is not None, "no answer"
    if "error" in obj:
        code: int = obj["error"]["code"]
        return code
    return None


def recall_records(client: A2MClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    obj = send(client, rpc("memory/recall", params))
    assert obj is not None
    assert "result" in obj, obj.get("error")
    records: list[dict[str, Any]] = obj["result"]["records"]
    return records


# -- malformed JSON --------------------------------------------------------------------------------

VALID = rpc("memory/describe", {})


@ENVELOPE
@pytest.mark.parametrize(
    "raw",
    [
        VALID[:-1],
        VALID[: len(VALID) // 2],
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"abc',
        VALID + b"xyz",
        VALID + b"}",
        VALID + VALID,
        VALID + b",",
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"\xff\xfe"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"\xc3\x28"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"\xed\xa0\x80"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"min_score":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"min_score":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"min_score":-Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"limit":1e400}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"a\x01b"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"a\x00b"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"\\x41"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"query":"\\ud800"}}',
        b"\xef\xbb\xbf" + VALID,
        b"\x00",
        b"\xff\xfe\x00{",
        b"{}}",
        b"{{}}",
        b"NaN",
        b"undefined",
        b"{\"jsonrpc\":'2.0'}",
        b"/* comment */" + VALID,
    ],
    ids=lambda raw: repr(raw)[:50],
)
def test_malformed_json_is_a_parse_error(client: A2MClient, raw: bytes) -> None:
    obj = send(client, raw)
    assert obj is not None
    if raw.startswith(b"\xef\xbb\xbf"):
        # RFC 8259 §8.1: a parser MAY ignore a byte order mark.
        assert obj.get("error", {}).get("code", PARSE_ERROR) == PARSE_ERROR
        return
    assert obj["error"]["code"] == PARSE_ERROR
    assert obj["id"] is None


@ENVELOPE
def test_whitespace_only_body_over_http_is_a_parse_error(http_client: HttpClient) -> None:
    for raw in (b" ", b"\n\n", b"\t \r\n"):
        obj = assert_clean(Reply("http", *_post(http_client, raw)))
        assert obj is not None
        assert obj["error"]["code"] == PARSE_ERROR


def _post(client: HttpClient, raw: bytes) -> tuple[bytes, int, dict[str, str]]:
    r = client.post(raw)
    return r.content, r.status_code, dict(r.headers)


@ENVELOPE
@pytest.mark.parametrize(
    "raw",
    [b'"memory/describe"', b"42", b"-1.5e3", b"null", b"true", b"false", b'""', b"[]", b"[[]]"],
    ids=lambda raw: raw.decode(),
)
def test_json_that_is_not_an_object_is_invalid_request(client: A2MClient, raw: bytes) -> None:
    obj = send(client, raw)
    assert obj is not None
    assert obj["error"]["code"] == INVALID_REQUEST
    assert obj["id"] is None


@ENVELOPE
@pytest.mark.parametrize("request_id", [{"a": 1}, [1, 2], [], {}, True, False], ids=repr)
def test_id_of_object_array_or_bool_type_is_invalid_request(
    client: A2MClient, request_id: Any
) -> None:
    obj = send(client, rpc("memory/describe", {}, request_id))
    assert obj is not None
    assert obj["error"]["code"] == INVALID_REQUEST
    assert obj["id"] is None


@ENVELOPE
def test_duplicate_members_are_answered_cleanly(client: A2MClient) -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"id":2,"method":"memory/bogus","method":"memory/describe"}'
    send(client, raw)


# -- wrong types everywhere ------------------------------------------------------------------------

VALUES: dict[str, Any] = {
    "null": None,
    "true": True,
    "int": 3,
    "float": 0.5,
    "string": "s",
    "array": [],
    "array-mixed": [1, "a", None],
    "object": {},
    "object-nested": {"a": {"b": [1]}},
}
# JSON types each param accepts (docs/protocol.md); anything else must be INVALID_PARAMS.
ACCEPTS: dict[str, dict[str, set[str]]] = {
    "memory/recall": {
        "query": {"string"},
        "limit": {"int"},
        "where": {"object"},
        "min_score": {"int", "float"},
        "key_prefix": {"string"},
        "embeddings": {"true"},
        "prompt": {"true", "object", "object-nested"},
        "embedding": {"array"},
    },
    "memory/timeline": {
        "limit": {"int"},
        "where": {"object"},
        "key_prefix": {"string"},
        "embeddings": {"true"},
        "prompt": {"true", "object", "object-nested"},
    },
    "memory/fetch": {"key": {"string"}, "embeddings": {"true"}},
    "memory/describe": {"protocol": {"string"}},
}
MATRIX = [
    (method, param, kind)
    for method, params in ACCEPTS.items()
    for param, accepted in params.items()
    for kind in VALUES
    if kind not in accepted and kind != "null"
]


@pytest.mark.parametrize(("method", "param", "kind"), MATRIX, ids=lambda v: str(v))
def test_wrong_type_anywhere_is_invalid_params(
    params_client: A2MClient, params_describe: dict[str, Any], method: str, param: str, kind: str
) -> None:
    client, describe = params_client, params_describe
    params: dict[str, Any] = {param: VALUES[kind]}
    if method == "memory/fetch" and param != "key":
        params["key"] = "a/b"
    if method == "memory/fetch" and "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    code = code_of(client, rpc(method, params))
    if param == "embedding" and "embeddings" not in describe["capabilities"]:
        assert code in (INVALID_PARAMS, -32003)
    else:
        assert code == INVALID_PARAMS


@pytest.mark.parametrize(
    ("method", "param"),
    [(m, p) for m, params in ACCEPTS.items() for p in params],
    ids=lambda v: str(v),
)
def test_null_params_are_clean(
    client: A2MClient, describe: dict[str, Any], method: str, param: str
) -> None:
    if method == "memory/fetch" and "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    code = code_of(client, rpc(method, {param: None}))
    assert code in (None, INVALID_PARAMS)


def test_nested_wrong_types_in_where_are_invalid_params(client: A2MClient) -> None:
    for where in (
        {"group": {"$in": ["a"]}},
        {"group": [{"a": 1}]},
        {"group": [[1]]},
        {"group": [None]},
    ):
        assert code_of(client, rpc("memory/recall", {"where": where})) == INVALID_PARAMS


# -- sizes -----------------------------------------------------------------------------------------


def test_one_megabyte_query(client: A2MClient, describe: dict[str, Any]) -> None:
    """The right answer depends on the limits: 413 over the body limit, else -32602."""
    query = "a" * 1_000_000
    raw = rpc("memory/recall", {"query": query})
    reply = client.send(raw)
    obj = assert_clean(reply)
    max_query = describe["limits"].get("max_query_length")
    if client.transport == "http" and len(raw) > max_body_bytes():
        assert reply.status == 413
    elif max_query is not None and len(query) > max_query:
        assert obj is not None
        assert obj["error"]["code"] == INVALID_PARAMS
    else:
        assert obj is not None


def test_one_mebibyte_query_over_http_is_413(http_client: HttpClient) -> None:
    raw = rpc("memory/recall", {"query": "a" * 1_048_576})
    assert len(raw) > max_body_bytes()
    reply = http_client.send(raw)
    assert_clean(reply)
    assert reply.status == 413


def test_one_mebibyte_query_over_stdio_is_invalid_params(stdio_client: StdioClient) -> None:
    assert code_of(stdio_client, rpc("memory/recall", {"query": "a" * 1_048_576})) == (
        INVALID_PARAMS
    )


def test_overlong_stdio_line_is_refused_and_the_server_goes_on(stdio_client: StdioClient) -> None:
    raw = rpc("memory/describe", {"pad": "a" * (6 * 1024 * 1024)})
    obj = send(stdio_client, raw)
    assert obj is not None
    assert obj["error"]["code"] in (INVALID_REQUEST, PARSE_ERROR)
    assert stdio_client.call("memory/describe")["read_only"] is True


def test_query_at_and_over_max_query_length(client: A2MClient, describe: dict[str, Any]) -> None:
    max_query = describe["limits"].get("max_query_length")
    if max_query is None:
        pytest.skip("no max_query_length declared")
    at = recall_records(client, {"query": ("gateway " * max_query)[:max_query]})
    assert_scores(at)
    top = f"{at[0].get('title', '')} {at[0].get('content', '')}".lower()
    assert "gateway" in top, "the longest query allowed was not searched"
    over = code_of(client, rpc("memory/recall", {"query": "a" * (max_query + 1)}))
    assert over == INVALID_PARAMS


def _nest_object(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def _nest_array(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_200_deep_where_is_invalid_params(client: A2MClient) -> None:
    assert code_of(client, rpc("memory/recall", {"where": _nest_object(200)})) == INVALID_PARAMS
    assert code_of(client, rpc("memory/recall", {"where": {"group": _nest_object(199)}})) == (
        INVALID_PARAMS
    )
    assert code_of(client, rpc("memory/recall", {"where": {"group": _nest_array(199)}})) == (
        INVALID_PARAMS
    )
    assert code_of(client, rpc("memory/timeline", {"where": _nest_object(200)})) == INVALID_PARAMS


def test_200_deep_unknown_param_is_ignored(client: A2MClient) -> None:
    params = {"query": "gateway", "limit": 3, "future": _nest_object(200)}
    plain = recall_records(client, {"query": "gateway", "limit": 3})
    assert len(plain) == 3
    assert recall_records(client, params) == plain


@ENVELOPE
@pytest.mark.parametrize("depth", [1500, 20_000])
def test_very_deep_nesting_is_clean(client: A2MClient, depth: int) -> None:
    raw = (
        b'{"jsonrpc":"2.0","id":1,"method":"memory/recall","params":{"where":{"g":'
        + b"[" * depth
        + b"]" * depth
        + b"}}}"
    )
    code = code_of(client, raw)
    assert code in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS)


def test_many_where_keys_and_values_are_clean(client: A2MClient) -> None:
    for where in (
        {f"k{i}": i for i in range(1000)},
        {"group": [f"g{i}" for i in range(10_000)]},
    ):
        code = code_of(client, rpc("memory/recall", {"where": where}))
        assert code in (None, INVALID_PARAMS)


def test_huge_embedding_is_clean(client: A2MClient) -> None:
    code = code_of(client, rpc("memory/recall", {"embedding": [0.5] * 50_000}))
    assert code in (INVALID_PARAMS, -32008, -32003)


# -- limits ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limit",
    [10**6, 2**31, 2**63 - 1, 2**64 - 1, 2**64, 10**30, -1, -(2**63), 2.5, 1e300, "10", [10]],
    ids=repr,
)
@pytest.mark.parametrize("method", ["memory/recall", "memory/timeline"])
def test_bad_limits_are_invalid_params(params_client: A2MClient, method: str, limit: Any) -> None:
    assert code_of(params_client, rpc(method, {"limit": limit})) == INVALID_PARAMS


def test_float_limit_with_integral_value_is_clean(client: A2MClient) -> None:
    assert code_of(client, rpc("memory/recall", {"limit": 5.0})) in (None, INVALID_PARAMS)


@pytest.mark.parametrize("min_score", [-1, 0, 1, 2, 1e308, -1e308])
def test_out_of_range_min_score_is_clean(client: A2MClient, min_score: float) -> None:
    obj = send(client, rpc("memory/recall", {"query": "gateway", "min_score": min_score}))
    assert obj is not None
    if "result" in obj:
        records = obj["result"]["records"]
        if min_score <= 0:
            assert records, "a min_score every score passes dropped records"
        elif min_score > 1:
            assert records == [], "no score is above 1"
        assert all(r["score"] >= min_score for r in records)
    else:
        assert obj["error"]["code"] == INVALID_PARAMS


# -- control characters and query syntax -----------------------------------------------------------

CONTROL = [
    "\x00",
    "a\x00b",
    "\x01\x02\x1f",
    "\r\n\t",
    "\x7f",
    "\u2028\u2029",
    "\ufeff",
    "\U0010ffff",
]
SYNTAX = [
    '"*?~^:\\/()[]{}!&|+-',
    "OR 1=1",
    "' OR '1'='1",
    "*:*",
    "*",
    "?",
    "title:foo AND body:bar",
    "foo~2",
    "a^10",
    "[a TO z]",
    "{!lucene}x",
    "/.*/",
    "\\",
    '"',
    "(((",
    "))))",
    "-",
    "+",
    "&&",
    "||",
    "NOT",
    "AND OR NOT",
    "_id:1",
    "$where",
    '{"match_all":{}}',
    "%s%s%s%n",
    "${jndi:ldap://x}",
    "../../../../etc/passwd",
    "<script>alert(1)</script>",
    "DROP TABLE records; --",
]


@pytest.mark.parametrize("query", CONTROL + SYNTAX, ids=repr)
def test_odd_queries_get_a_clean_ranked_answer(client: A2MClient, query: str) -> None:
    obj = send(client, rpc("memory/recall", {"query": query, "limit": 5}))
    assert obj is not None
    assert "result" in obj, f"query {query!r} was refused: {obj.get('error')}"
    if obj["result"]["records"]:  # most of these match nothing; what does match is scored
        assert_scores(obj["result"]["records"])


@pytest.mark.parametrize("value", CONTROL + SYNTAX, ids=repr)
def test_odd_where_values_and_names_match_nothing(client: A2MClient, value: str) -> None:
    for where in ({"group": value}, {"key": value}, {"id": value}, {value: value}):
        obj = send(client, rpc("memory/recall", {"where": where, "limit": 5}))
        assert obj is not None
        if "error" in obj:
            assert obj["error"]["code"] == INVALID_PARAMS, (where, obj["error"])
        else:
            assert obj["result"]["records"] == [], f"{where!r} matched records"


@pytest.mark.parametrize("value", CONTROL + SYNTAX, ids=repr)
def test_odd_keys_and_prefixes_are_literal(
    client: A2MClient, describe: dict[str, Any], value: str
) -> None:
    if "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    obj = send(client, rpc("memory/fetch", {"key": value}))
    assert obj is not None
    if "error" in obj:
        assert obj["error"]["code"] == INVALID_PARAMS
    else:
        assert obj["result"] == {"record": None}
    for method in ("memory/recall", "memory/timeline"):
        obj = send(client, rpc(method, {"key_prefix": value, "limit": 5}))
        assert obj is not None
        if "error" in obj:
            assert obj["error"]["code"] == INVALID_PARAMS
        else:
            assert obj["result"]["records"] == [], f"key_prefix {value!r} matched records"


def test_unicode_and_emoji_queries(client: A2MClient) -> None:
    queries = ("naïve café", "日本語のクエリ", "🧠💾", "Ωmega ∑ ∞", "a" + "\u0301" * 50)
    for query in queries:
        records = recall_records(client, {"query": query})
        if records:  # the English corpus may hold none of these words
            assert_scores(records)
        # The same text beside a word the demo corpus holds must still rank it.
        assert_scores(recall_records(client, {"query": f"{query} memory"}))


# -- methods and envelopes -------------------------------------------------------------------------


@ENVELOPE
@pytest.mark.parametrize(
    "method",
    [
        "memory/" + "x" * 10_000,
        "x" * 200_000,
        "memory/recall\x00",
        "memory/recall\n",
        "memory/../memory/recall",
        "\u202ememory/recall",
        "memory/describe" + " " * 1000,
    ],
    ids=lambda m: repr(m)[:30],
)
def test_long_or_odd_method_names_are_method_not_found(client: A2MClient, method: str) -> None:
    obj = send(client, rpc(method, {}))
    assert obj is not None
    assert obj["error"]["code"] == METHOD_NOT_FOUND


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "memory/describe", "params": {"protocol": None}},
        {"jsonrpc": "2.0", "id": "x" * 100_000, "method": "memory/describe"},
        {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": {"": ""}},
        {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": {"\x00": 1}},
        {"jsonrpc": "2.0", "id": 1.0e308, "method": "memory/describe"},
        {"jsonrpc": "2.0", "id": -0.0, "method": "memory/describe"},
        {"jsonrpc": "2.0", "id": 1, "method": "memory/describe", "extra": {"a": [1]}},
    ],
    ids=[
        "null-protocol",
        "long-id",
        "empty-param-name",
        "nul-param-name",
        "big-id",
        "neg-zero",
        "extra-member",
    ],
)
def test_odd_envelopes_are_clean(client: A2MClient, message: dict[str, Any]) -> None:
    obj = send(client, orjson.dumps(message))
    assert obj is not None


def test_the_server_is_still_alive(client: A2MClient) -> None:
    assert client.call("memory/describe")["read_only"] is True
    assert_scores(client.call("memory/recall", {"query": "gateway"})["records"])


# -- HTTP framing ----------------------------------------------------------------------------------


def _raw_http(client: HttpClient, head: bytes, body: bytes = b"") -> int:
    host, port = client.base_url.rsplit("//", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head + b"\r\n\r\n" + body)
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    status_line = data.split(b"\r\n", 1)[0].split()
    assert len(status_line) >= 2, data[:200]
    return int(status_line[1])


@ENVELOPE
@pytest.mark.parametrize(
    "content_length",
    [b"abc", b"-1", b"1" * 30, b"99999999999"],
    ids=lambda v: v.decode()[:12],
)
def test_bad_content_length_is_a_4xx(http_client: HttpClient, content_length: bytes) -> None:
    head = (
        b"POST /a2m HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: " + content_length
    )
    status = _raw_http(http_client, head, VALID)
    assert 400 <= status < 500, status


def test_the_leak_check_itself_catches_leaks() -> None:
    for leaked in (
        'Traceback (most recent call last):\n  File "/work/main/gateway/store.py", line 3',
        "1 validation error for RecallParams",
        "see /usr/lib/python3/site-packages/x.py",
        "ApiError(400, 'search_phase_execution_exception')",
        "Connection refused: http://127.0.0.1:19300",
        "opensearchpy.exceptions.ConnectionError",
    ):
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": leaked}}
        )
        with pytest.raises(AssertionError):
            assert_clean(Reply("http", body, 200))
    with pytest.raises(AssertionError):
        assert_clean(Reply("http", b"", 502))
