"""The JSON-RPC 2.0 envelope (§8), the capability gate (§2) and read-only refusals (§2.1)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.conftest import (
    ENVELOPE,
    METHOD_CAPABILITY,
    NO_PARAMS,
    PROTOCOL,
    A2MClient,
)

pytestmark = pytest.mark.integration

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
CAPABILITY_NOT_SUPPORTED = -32003
READ_ONLY = -32004

DESCRIBE = {"jsonrpc": "2.0", "id": 1, "method": "memory/describe", "params": {}}


# -- unknown methods and undeclared capabilities ---------------------------------------------------


@ENVELOPE
@pytest.mark.parametrize(
    "method",
    [
        "memory/bogus",
        "memory/",
        "memory",
        "tools/list",
        "resources/read",
        "prompts/get",
        "initialize",
        "foo",
        "MEMORY/DESCRIBE",
        "memory/describe/",
        " memory/describe",
        "memory/recall2",
        "rpc.discover",
    ],
)
def test_unknown_method_is_method_not_found(client: A2MClient, method: str) -> None:
    assert client.error_code(method, {}) == METHOD_NOT_FOUND


def _undeclared(describe: dict[str, Any]) -> list[str]:
    caps = set(describe["capabilities"])
    return sorted(m for m, cap in METHOD_CAPABILITY.items() if cap not in caps)


@pytest.mark.parametrize(
    "params",
    [
        NO_PARAMS,
        {},
        {"ids": ["x"], "tier": "semantic"},
        {"session": "s1", "owner": "me", "cursor": "0", "kinds": ["written"]},
        ["by-position"],
    ],
    ids=["no-params", "empty", "plausible", "other-plausible", "by-position"],
)
def test_undeclared_capability_is_capability_not_supported(
    client: A2MClient, describe: dict[str, Any], params: Any
) -> None:
    methods = _undeclared(describe)
    assert methods, "the demo store declares every capability?"
    for method in methods:
        err = client.error(method, params)
        assert err["code"] == CAPABILITY_NOT_SUPPORTED, (method, err)


def test_appendix_a_consolidate_exchange(client: A2MClient, describe: dict[str, Any]) -> None:
    if "tiers" in describe["capabilities"]:
        pytest.skip("tiers declared")
    response = client.send_json({"jsonrpc": "2.0", "id": 4, "method": "memory/consolidate"})
    obj = response.response()
    assert obj["id"] == 4
    assert obj["error"]["code"] == CAPABILITY_NOT_SUPPORTED
    assert isinstance(obj["error"]["message"], str)


def test_tier_param_without_tiers_is_capability_not_supported(
    client: A2MClient, describe: dict[str, Any]
) -> None:
    if "tiers" in describe["capabilities"]:
        pytest.skip("tiers declared")
    # docs/protocol.md: silently dropping a tier filter changes the answer.
    assert client.error_code("memory/recall", {"query": "x", "tier": "semantic"}) == (
        CAPABILITY_NOT_SUPPORTED
    )
    assert client.error_code("memory/timeline", {"tier": "episodic"}) == CAPABILITY_NOT_SUPPORTED


# -- read-only -------------------------------------------------------------------------------------

WRITE_PARAMS: list[Any] = [
    NO_PARAMS,
    {},
    {"records": [{"content": "the deploy key rotates every 90 days", "role": "user"}]},
    {"records": [{"id": "r1", "content": "x", "tier": "semantic", "metadata": {"a": [1]}}]},
    {"records": "garbage"},
    {"records": [1, None, "x"]},
    {"ids": ["a", "b"]},
    {"ids": 5},
    {"query": "everything"},
    {"where": {"group": "g"}, "key_prefix": "a/"},
    {"zzz": {"nested": [1, 2, {"x": None}]}},
    [],
    [{"content": "by position"}],
]


@ENVELOPE
@pytest.mark.parametrize("method", ["memory/remember", "memory/forget"])
@pytest.mark.parametrize("params", WRITE_PARAMS, ids=lambda p: repr(p)[:40])
def test_writes_are_read_only_whatever_the_params(
    client: A2MClient, method: str, params: Any
) -> None:
    # §2.1: consistently READ_ONLY; docs/protocol.md: before params are looked at.
    err = client.error(method, params)
    assert err["code"] == READ_ONLY, err


@ENVELOPE
@pytest.mark.parametrize(
    "params",
    [
        NO_PARAMS,
        {},
        {"ids": ["a"]},
        {"query": "x", "into": "semantic", "key": "k"},
        {"ids": 5},
        ["by-position"],
    ],
    ids=lambda p: repr(p)[:40],
)
def test_summarize_is_an_undeclared_capability(client: A2MClient, params: Any) -> None:
    # docs/protocol.md: -32003 as for any undeclared capability (canonical §2, and the
    # reference implementation), whatever the params.
    err = client.error("memory/summarize", params)
    assert err["code"] == CAPABILITY_NOT_SUPPORTED


@ENVELOPE
def test_read_only_is_consistent_across_repeats(client: A2MClient) -> None:
    params = {"records": [{"content": "same write, three times"}]}
    codes = {client.error_code("memory/remember", params) for _ in range(3)}
    assert codes == {READ_ONLY}


# -- envelope --------------------------------------------------------------------------------------


@ENVELOPE
@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"not json",
        b'{"jsonrpc":"2.0","id":1,"method":"memory/describe"',
        b"{'jsonrpc':'2.0','id':1,'method':'memory/describe'}",
        b'{"jsonrpc":"2.0","id":1,"method":"memory/describe",}',
    ],
    ids=["empty", "open-brace", "words", "truncated", "single-quotes", "trailing-comma"],
)
def test_parse_error_has_null_id(client: A2MClient, raw: bytes) -> None:
    if raw == b"" and client.transport == "stdio":
        pytest.skip("an empty stdio line is a blank line, ignored (tested in test_stdio)")
    obj = client.send(raw).response()
    assert obj["error"]["code"] == PARSE_ERROR
    assert obj["id"] is None


@ENVELOPE
@pytest.mark.parametrize(
    "batch",
    [[], [DESCRIBE], [DESCRIBE, {**DESCRIBE, "id": 2}], [1, 2, 3], [{"jsonrpc": "2.0"}]],
    ids=["empty", "one", "two", "numbers", "junk"],
)
def test_batch_is_refused_with_invalid_request(client: A2MClient, batch: list[Any]) -> None:
    reply = client.send_json(batch)
    obj = reply.json()
    assert isinstance(obj, dict), "a batch gets one error object, never an array"
    assert obj["error"]["code"] == INVALID_REQUEST
    assert obj["id"] is None


@ENVELOPE
@pytest.mark.parametrize(
    "request_id",
    ["abc", "", "ünïcødé-✓", "x" * 1000, 0, 42, -7, 2**53, 9_007_199_254_740_993, 1.5],
    ids=lambda v: repr(v)[:20],
)
def test_id_is_echoed(client: A2MClient, request_id: Any) -> None:
    response = client.request("memory/describe", {}, request_id=request_id)
    assert response["id"] == request_id
    assert type(response["id"]) is type(request_id)


@ENVELOPE
def test_id_is_echoed_on_errors(client: A2MClient) -> None:
    for method, params in [
        ("memory/bogus", {}),
        ("memory/remember", {}),
        ("memory/recall", {"limit": "x"}),
    ]:
        response = client.request(method, params, request_id="err-echo")
        assert response["id"] == "err-echo"
        assert "error" in response


@ENVELOPE
def test_null_id_is_answered(client: A2MClient) -> None:
    # An explicit null id is a request (discouraged by JSON-RPC), not a notification.
    reply = client.send_json({"jsonrpc": "2.0", "id": None, "method": "memory/describe"})
    obj = reply.response()
    assert obj["id"] is None
    assert obj["result"]["protocol"] == PROTOCOL


@ENVELOPE
@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "memory/describe"},
        {"jsonrpc": "2.0", "method": "memory/recall", "params": {"query": "qdrant"}},
        {"jsonrpc": "2.0", "method": "memory/remember", "params": {"records": []}},
        {"jsonrpc": "2.0", "method": "memory/forget", "params": {}},
        {"jsonrpc": "2.0", "method": "memory/bogus"},
        {"jsonrpc": "2.0", "method": "memory/consolidate"},
        {"jsonrpc": "2.0", "method": "memory/recall", "params": {"limit": "bad"}},
    ],
    ids=["describe", "recall", "remember", "forget", "unknown", "undeclared", "bad-params"],
)
def test_notification_gets_no_response(client: A2MClient, message: dict[str, Any]) -> None:
    reply = client.send_json(message)
    assert reply.empty, f"a notification was answered: {reply.body[:200]!r}"
    if client.transport == "http":
        assert reply.status == 202


@ENVELOPE
@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "memory/describe"},
        {"jsonrpc": "1.0", "id": 1, "method": "memory/describe"},
        {"jsonrpc": 2.0, "id": 1, "method": "memory/describe"},
        {"jsonrpc": "2.0 ", "id": 1, "method": "memory/describe"},
        {"jsonrpc": None, "id": 1, "method": "memory/describe"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": None},
        {"jsonrpc": "2.0", "id": 1, "method": ["memory/describe"]},
        {"jsonrpc": "2.0", "id": 1, "method": ""},
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}},
    ],
    ids=[
        "no-jsonrpc",
        "jsonrpc-1.0",
        "jsonrpc-number",
        "jsonrpc-space",
        "jsonrpc-null",
        "no-method",
        "method-number",
        "method-null",
        "method-array",
        "method-empty",
        "a-response",
        "an-error-response",
    ],
)
def test_not_a_request_is_invalid_request(client: A2MClient, message: dict[str, Any]) -> None:
    obj = client.send_json(message).response()
    assert obj["error"]["code"] == INVALID_REQUEST
    assert obj["id"] in (1, None)


@ENVELOPE
@pytest.mark.parametrize("request_id", [{"a": 1}, [1], True, False], ids=repr)
def test_id_of_wrong_type_is_invalid_request(client: A2MClient, request_id: Any) -> None:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "memory/describe"}
    obj = client.send_json(message).response()
    assert obj["error"]["code"] == INVALID_REQUEST
    assert obj["id"] is None


@ENVELOPE
@pytest.mark.parametrize("params", ["x", 5, True], ids=repr)
def test_params_that_are_not_structured_are_refused(client: A2MClient, params: Any) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "memory/recall", "params": params}
    obj = client.send_json(message).response()
    assert obj["error"]["code"] in (INVALID_REQUEST, INVALID_PARAMS)


@pytest.mark.parametrize("method", ["memory/describe", "memory/recall", "memory/timeline"])
def test_by_position_params_are_accepted_or_invalid_params(client: A2MClient, method: str) -> None:
    # §4: servers MUST accept by-name params and MAY accept by-position.
    response = client.request(method, [])
    if "error" in response:
        assert response["error"]["code"] == INVALID_PARAMS


# -- params: unknown ignored, wrong types refused --------------------------------------------------


def test_unknown_params_are_ignored(client: A2MClient) -> None:
    base = {"query": "configuration of a store", "limit": 5}
    plain = client.call("memory/recall", base)
    extra = client.call(
        "memory/recall",
        {**base, "rerank": True, "x-a2m-0.2": {"deep": [1, {"x": None}]}, "session_hint": "s"},
    )
    assert extra == plain
    plain_tl = client.call("memory/timeline", {"limit": 5})
    extra_tl = client.call("memory/timeline", {"limit": 5, "cursor": "abc", "order": "desc"})
    assert extra_tl == plain_tl


WRONG_TYPES: list[tuple[str, dict[str, Any]]] = [
    ("memory/recall", {"query": 5}),
    ("memory/recall", {"query": ["a", "b"]}),
    ("memory/recall", {"query": {"text": "a"}}),
    ("memory/recall", {"query": True}),
    ("memory/recall", {"limit": "5"}),
    ("memory/recall", {"limit": True}),
    ("memory/recall", {"limit": 2.5}),
    ("memory/recall", {"limit": [5]}),
    ("memory/recall", {"where": []}),
    ("memory/recall", {"where": "group=x"}),
    ("memory/recall", {"where": 1}),
    ("memory/recall", {"where": {"group": {"$ne": "x"}}}),
    ("memory/recall", {"where": {"group": [["a"]]}}),
    ("memory/recall", {"where": {"group": [{"a": 1}]}}),
    ("memory/recall", {"min_score": "0.5"}),
    ("memory/recall", {"min_score": [0.5]}),
    ("memory/recall", {"min_score": True}),
    ("memory/recall", {"key_prefix": 5}),
    ("memory/recall", {"key_prefix": ["a/"]}),
    ("memory/recall", {"embeddings": "true"}),
    ("memory/recall", {"embeddings": 1}),
    ("memory/recall", {"prompt": 5}),
    ("memory/recall", {"prompt": "list"}),
    ("memory/recall", {"prompt": {"style": 5}}),
    ("memory/recall", {"prompt": {"budget": "10"}}),
    ("memory/recall", {"prompt": {"budget": 2.5}}),
    ("memory/recall", {"prompt": {"method": ["template"]}}),
    ("memory/recall", {"embedding": "0.1,0.2"}),
    ("memory/recall", {"embedding": ["a", "b"]}),
    ("memory/recall", {"embedding": {"0": 0.1}}),
    ("memory/timeline", {"limit": "5"}),
    ("memory/timeline", {"limit": 1.5}),
    ("memory/timeline", {"where": ["a"]}),
    ("memory/timeline", {"where": {"group": {"a": 1}}}),
    ("memory/timeline", {"key_prefix": {}}),
    ("memory/timeline", {"embeddings": "yes"}),
    ("memory/timeline", {"prompt": []}),
    ("memory/describe", {"protocol": 1}),
    ("memory/describe", {"protocol": ["a2m/0.1"]}),
]


@pytest.mark.parametrize(("method", "params"), WRONG_TYPES, ids=lambda v: repr(v)[:40])
def test_wrong_param_types_are_invalid_params(
    params_client: A2MClient, params_describe: dict[str, Any], method: str, params: dict[str, Any]
) -> None:
    client, describe = params_client, params_describe
    if "embedding" in params and "embeddings" not in describe["capabilities"]:
        # An embedding param of an undeclared capability may be gated first.
        assert client.error_code(method, params) in (INVALID_PARAMS, CAPABILITY_NOT_SUPPORTED)
        return
    err = client.error(method, params)
    assert err["code"] == INVALID_PARAMS, err
    text = f"{err.get('message')} {err.get('data')}"
    assert "pydantic" not in text, "validator text on the wire"
    assert "Input should be" not in text, "validator text on the wire"


@pytest.mark.parametrize(
    "params",
    [{"key": 5}, {"key": None}, {"key": ["a"]}, {"key": "a", "embeddings": "yes"}],
    ids=repr,
)
def test_fetch_wrong_types_are_invalid_params(
    client: A2MClient, describe: dict[str, Any], params: dict[str, Any]
) -> None:
    if "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    assert client.error_code("memory/fetch", params) == INVALID_PARAMS
