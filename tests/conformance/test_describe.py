"""memory/describe (§4.1) and truthful capabilities (§2, §3.6-§3.8, §4.16, Appendix B)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conformance.conftest import (
    CORE_METHODS,
    KNOWN_CAPABILITIES,
    METHOD_CAPABILITY,
    PROTOCOL,
    A2MClient,
    Corpus,
    HttpClient,
    StdioClient,
)

pytestmark = pytest.mark.integration

CORE_FIELDS = ("protocol", "name", "capabilities", "methods", "read_only", "limits")


def test_describe_returns_protocol_name_capabilities_methods(describe: dict[str, Any]) -> None:
    assert describe["protocol"] == PROTOCOL
    assert isinstance(describe["name"], str)
    assert describe["name"]
    caps = describe["capabilities"]
    assert isinstance(caps, list)
    assert all(isinstance(c, str) for c in caps)
    assert len(caps) == len(set(caps)), "capabilities listed twice"
    assert "core" in caps
    methods = describe["methods"]
    assert isinstance(methods, list)
    assert all(isinstance(m, str) for m in methods)
    assert len(methods) == len(set(methods))
    assert {"memory/describe", "memory/recall", "memory/timeline"} <= set(methods)


def test_describe_without_params_or_with_empty_params(client: A2MClient) -> None:
    with_protocol = client.call("memory/describe", {"protocol": PROTOCOL})
    assert client.call("memory/describe") == with_protocol
    assert client.call("memory/describe", {}) == with_protocol


def test_describe_read_only_and_limits(describe: dict[str, Any]) -> None:
    assert describe["read_only"] is True
    limits = describe["limits"]
    assert isinstance(limits, dict)
    assert "max_recall_limit" in limits
    for name, value in limits.items():
        assert isinstance(value, int), (name, value)
        assert not isinstance(value, bool), (name, value)
        assert value > 0, (name, value)


def test_capabilities_are_known_and_nothing_untrue(describe: dict[str, Any]) -> None:
    caps = set(describe["capabilities"])
    assert caps <= KNOWN_CAPABILITIES, caps - KNOWN_CAPABILITIES
    # A read-only retrieval gateway has no tiers, salience, sessions or summarizer
    # (docs/protocol.md); summarize would also have to write (§4.15).
    assert not caps & {"tiers", "salience", "sessions", "summarize"}
    assert "tiers" not in describe, "describe reports a tier layout without declaring tiers"
    if "events" in caps:
        assert isinstance(describe.get("events", {}).get("push"), bool)
    if "summarize" not in caps:
        assert "summarize" not in describe


def test_methods_agree_with_capabilities(describe: dict[str, Any]) -> None:
    caps = set(describe["capabilities"])
    methods = set(describe["methods"])
    for method in CORE_METHODS:
        # remember/forget are implemented by a read-only server: they answer READ_ONLY (§2.1).
        assert method in methods, f"core method {method} missing from methods"
    for method in methods:
        assert method in METHOD_CAPABILITY, (
            f"describe lists a method the draft does not define: {method}"
        )
        assert METHOD_CAPABILITY[method] in caps, (
            f"{method} listed but its capability {METHOD_CAPABILITY[method]} is not declared"
        )
    expected = {m for m, cap in METHOD_CAPABILITY.items() if cap in caps}
    assert methods == expected


def test_unknown_params_to_describe_are_ignored(client: A2MClient) -> None:
    plain = client.call("memory/describe", {"protocol": PROTOCOL})
    extra = client.call(
        "memory/describe", {"protocol": PROTOCOL, "client": {"name": "x"}, "x-0.2-field": [1, 2]}
    )
    assert extra == plain


@pytest.mark.parametrize("protocol", ["a2m/0.2", "a2m/1.0", "a2m/0", "mcp/2025-06-18", ""])
def test_describe_never_pretends_to_speak_another_version(client: A2MClient, protocol: str) -> None:
    response = client.request("memory/describe", {"protocol": protocol})
    if "error" in response:
        assert response["error"]["code"] == -32007
    else:
        assert response["result"]["protocol"] == PROTOCOL


def test_describe_is_the_same_over_both_transports(
    http_client: HttpClient, stdio_client: StdioClient
) -> None:
    over_http = http_client.call("memory/describe", {"protocol": PROTOCOL})
    over_stdio = stdio_client.call("memory/describe", {"protocol": PROTOCOL})
    for name in CORE_FIELDS:
        if name == "capabilities":
            # scopes may be true on stdio and not over HTTP (§6); nothing else may differ.
            assert set(over_http[name]) - {"scopes"} == set(over_stdio[name]) - {"scopes"}
        elif name == "methods":
            assert set(over_http[name]) == set(over_stdio[name])
        else:
            assert over_http[name] == over_stdio[name], name


def test_no_scopes_over_http_without_authentication(http_client: HttpClient) -> None:
    # §6: a server that cannot authenticate its callers MUST NOT advertise scopes over a
    # network transport; the demo serves without credentials.
    describe = http_client.call("memory/describe", {"protocol": PROTOCOL})
    assert "scopes" not in describe["capabilities"]


def test_prompt_object_when_declared(describe: dict[str, Any]) -> None:
    if "prompt" not in describe["capabilities"]:
        pytest.skip("prompt not declared")
    prompt = describe["prompt"]
    assert isinstance(prompt["styles"], list)
    assert prompt["styles"]
    assert isinstance(prompt["methods"], list)
    assert "template" in prompt["methods"], "§4.16: the default method is template"
    # Canonical §4.16 and docs/protocol.md: exactly what is offered, auto being a MUST.
    assert set(prompt["styles"]) == {"auto", "facts", "transcript"}
    assert set(prompt["methods"]) == {"template", "none"}
    assert "model" in prompt, "§4.16 SHOULD report model"


def test_embeddings_object_when_declared(describe: dict[str, Any]) -> None:
    if "embeddings" not in describe["capabilities"]:
        assert describe.get("embeddings") is None
        return  # a store that declares it: test_embeddings.py
    emb = describe["embeddings"]
    dims = emb["dimensions"]
    assert dims is None or (isinstance(dims, int) and dims > 0)
    assert emb["metric"] in ("cosine", "dot", "l2")
    if "metrics" in emb:
        assert emb["metric"] in emb["metrics"]
        assert set(emb["metrics"]) <= {"cosine", "dot", "l2"}


def test_keys_declared_means_records_carry_keys(describe: dict[str, Any], corpus: Corpus) -> None:
    if "keys" not in describe["capabilities"]:
        pytest.skip("keys not declared")
    assert "memory/fetch" in describe["methods"]
    assert corpus.with_field("key"), "keys declared but no record carries a key"
    for record in corpus.with_field("key"):
        assert isinstance(record["key"], str)


def test_external_declared_means_records_carry_uri(
    describe: dict[str, Any], corpus: Corpus
) -> None:
    if "external" not in describe["capabilities"]:
        for record in corpus.records:
            assert "uri" not in record, "records carry uri without external declared"
        pytest.skip("external not declared")
    with_uri = corpus.with_field("uri")
    assert with_uri, "external declared but no record carries a uri"
    for record in with_uri:
        uri = record["uri"]
        assert isinstance(uri, str)
        # An RFC 3986 reference: no whitespace or control characters, splits cleanly.
        assert not any(ch.isspace() or ord(ch) < 0x20 for ch in uri), uri
        urlsplit(uri)
        if "media_type" in record:
            assert isinstance(record["media_type"], str)
            assert "/" in record["media_type"]


def test_records_have_string_ids_and_known_field_types(corpus: Corpus) -> None:
    assert corpus.records, "the demo store holds no records"
    types: dict[str, type | tuple[type, ...]] = {
        "id": str,
        "content": str,
        "role": str,
        "metadata": dict,
        "group": str,
        "owner": str,
        "key": str,
        "uri": str,
        "media_type": str,
        "created_at": str,
        "updated_at": str,
    }
    for record in corpus.records:
        for name, expected in types.items():
            if name in record:
                assert isinstance(record[name], expected), (name, record[name])
        assert "embedding" not in record, "vectors are not returned by default (§3.7)"
