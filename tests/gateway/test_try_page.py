"""The try page's server side: static files under a strict policy, the switch, and the
mapping preview taking the A2M door's admission, scope and audit.

The in-memory engine stands in for an index: what is tested here is the HTTP layer and the
scope filter the store builds, not an engine's search. The page in a real browser against
a real `serve` is tests/gateway/test_try_page_browser.py.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest

from gateway.a2m.errors import ErrorCode
from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.security.auth import hash_api_key
from gateway.transports.try_page import ASSETS, STATIC
from tests.security.support import (
    BOB_KEY,
    CAROL_KEY,
    MemoryConnector,
    acl_docs,
    bearer,
    memory_store_config,
    rpc,
    visible_to,
)
from tests.support.asgi import asgi_client

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
SCOPE = {"filters": [{"field": "acl", "claims": ["groups"]}]}
AUTH = {
    "api_keys": [
        {"subject": "bob", "hash": hash_api_key(BOB_KEY), "claims": {"groups": ["team-b"]}},
        {"subject": "carol", "hash": hash_api_key(CAROL_KEY)},
    ]
}


def _gateway(*, auth: bool, try_page: bool = True) -> tuple[Gateway, MemoryConnector]:
    server: dict[str, Any] = {"try_page": try_page}
    stores = {"docs": memory_store_config(scope=SCOPE if auth else None), "more": {}}
    stores["more"] = memory_store_config()
    if auth:
        server["auth"] = AUTH
    cfg = parse_config(
        {"server": server, "stores": stores, "federations": {"both": {"members": ["docs", "more"]}}}
    )
    gateway = Gateway(cfg)
    engine = MemoryConnector(acl_docs(12))
    for store in gateway.stores.values():
        store.connector = engine
    return gateway, engine


async def _preview(
    http: httpx.AsyncClient, store: str, body: Any = None, **headers: str
) -> httpx.Response:
    return await http.post(
        f"/try/preview/{store}", json={} if body is None else body, headers=headers
    )


async def test_the_page_is_static_same_origin_and_under_a_strict_policy() -> None:
    gateway, _ = _gateway(auth=False)
    async with asgi_client(gateway) as http:
        page = await http.get("/try")
        files = {name: await http.get(f"/try/{name}") for name in ASSETS}
        other = await http.get("/try/try.html.bak")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy
    assert "connect-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe" not in policy
    # No inline script or handler, and nothing fetched from anywhere else.
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text)
    assert not re.search(r"\son[a-z]+=", page.text)
    for name, reply in files.items():
        assert reply.status_code == 200, name
        assert reply.headers["content-type"] == ASSETS[name]
        assert reply.content == (STATIC / name).read_bytes()
    for text in [page.text, *(r.text for r in files.values())]:
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", text)
        assert "https://" not in text
    assert other.status_code == 404


async def test_the_credential_is_kept_in_memory_only() -> None:
    script = (STATIC / "try.js").read_text(encoding="utf-8")
    for storage in ("localStorage", "sessionStorage", "document.cookie", "indexedDB"):
        assert storage not in script
    assert "innerHTML" not in script  # server values are written as text, never as markup


async def test_a_browser_at_root_gets_the_page_and_a_script_the_json() -> None:
    gateway, _ = _gateway(auth=False)
    async with asgi_client(gateway) as http:
        browser = await http.get("/", headers={"Accept": BROWSER_ACCEPT})
        script = await http.get("/", headers={"Accept": "application/json"})
    assert browser.status_code == 200
    assert browser.content == (STATIC / "try.html").read_bytes()
    assert "content-security-policy" in browser.headers
    assert script.headers["content-type"] == "application/json"
    assert script.json()["stores"] == {"docs": "/a2m/docs", "more": "/a2m/more"}
    assert "GET /try" in script.json()["endpoints"]


async def test_switched_off_there_is_no_page_and_no_preview_route() -> None:
    gateway, engine = _gateway(auth=False, try_page=False)
    async with asgi_client(gateway) as http:
        page = await http.get("/try")
        script = await http.get("/try/try.js")
        preview = await _preview(http, "docs")
        root = await http.get("/", headers={"Accept": BROWSER_ACCEPT})
    assert [page.status_code, script.status_code, preview.status_code] == [404, 404, 404]
    assert root.headers["content-type"].startswith("text/html")
    assert "<code>POST /a2m/{store}</code>" in root.text  # the plain listing
    assert "/try" not in root.text
    assert engine.calls == 0


async def test_with_auth_the_preview_is_admitted_before_anything_is_read() -> None:
    gateway, engine = _gateway(auth=True)
    async with asgi_client(gateway) as http:
        anonymous = await _preview(http, "docs")
        wrong = await _preview(http, "docs", **bearer("a2m_not-a-key-" + "x" * 40))
        unknown_anonymous = await _preview(http, "nosuch")
        unknown = await _preview(http, "nosuch", **bearer(BOB_KEY))
        foreign = await _preview(http, "docs", origin="http://evil.example", **bearer(BOB_KEY))
        form = await http.post(
            "/try/preview/docs", content=b"limit=3", headers={"content-type": "text/plain"}
        )
    for reply in (anonymous, wrong, unknown_anonymous):
        assert reply.status_code == 401
        assert reply.headers["www-authenticate"].startswith("Bearer")
    assert unknown.status_code == 404  # store names only after authentication
    assert foreign.status_code == 403
    assert form.status_code == 401
    assert engine.calls == 0


async def test_the_preview_shows_each_visible_document_beside_its_record_and_is_audited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway, engine = _gateway(auth=True)
    with caplog.at_level(logging.INFO, logger="a2m.audit"):
        async with asgi_client(gateway) as http:
            bob = await _preview(http, "docs", {"limit": 5}, **bearer(BOB_KEY))
            carol = await _preview(http, "docs", **bearer(CAROL_KEY))
    assert bob.status_code == 200
    body = bob.json()
    pairs = body["documents"]
    assert len(pairs) == 5
    for pair in pairs:
        doc, record = pair["document"], pair["record"]
        assert visible_to(["team-b"], doc["source"])
        assert record["id"] == doc["id"]
        assert record["content"] == doc["source"]["body"]
        assert record["key"] == doc["source"]["k"]
    assert body["mapping"]["content"] == "body"
    # Carol has no groups: the scope matches nothing and the engine is not even asked.
    assert carol.json()["documents"] == []
    assert len(engine.ordered_reads) == 1
    assert all(c.field == "acl" for c in engine.ordered_reads[0].filter.must)
    lines = [r for r in caplog.records if r.name == "a2m.audit" and r.getMessage() == "call"]
    assert [(getattr(r, "method", None), getattr(r, "principal", None)) for r in lines] == [
        ("gateway/preview", "api_key/bob"),
        ("gateway/preview", "api_key/carol"),
    ]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"limit": 0}, "'limit'"),
        ({"limit": 11}, "'limit'"),
        ({"limit": "3"}, "'limit'"),
        ([1], "object"),
        ("x", "object"),
    ],
    ids=["zero", "over-ten", "string", "array", "string-body"],
)
async def test_bad_preview_params_are_invalid_params_and_audited(
    body: Any, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    gateway, engine = _gateway(auth=False)
    with caplog.at_level(logging.INFO, logger="a2m.audit"):
        async with asgi_client(gateway) as http:
            reply = await _preview(http, "docs", body)
    assert reply.status_code == 200
    error = reply.json()["error"]
    assert error["code"] == ErrorCode.INVALID_PARAMS
    assert named in error["message"]
    assert engine.calls == 0
    [line] = [r for r in caplog.records if r.name == "a2m.audit"]
    assert getattr(line, "method", None) == "gateway/preview"
    assert getattr(line, "code", None) == ErrorCode.INVALID_PARAMS


async def test_a_preview_body_that_is_not_json_is_a_parse_error() -> None:
    gateway, engine = _gateway(auth=False)
    async with asgi_client(gateway) as http:
        reply = await http.post(
            "/try/preview/docs", content=b"{limit", headers={"content-type": "application/json"}
        )
    assert reply.json()["error"]["code"] == ErrorCode.PARSE_ERROR
    assert engine.calls == 0


async def test_a_federation_has_no_preview_and_a2m_has_no_preview_method() -> None:
    gateway, engine = _gateway(auth=False)
    async with asgi_client(gateway) as http:
        federation = await _preview(http, "both")
        a2m = await http.post("/a2m/docs", json=rpc("gateway/preview", {"limit": 3}))
    assert federation.json()["error"]["code"] == ErrorCode.CAPABILITY_NOT_SUPPORTED
    assert a2m.json()["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    assert engine.calls == 0


@pytest.mark.parametrize("try_page", [True, False])
async def test_only_the_pages_own_origin_is_let_in_and_only_with_the_page_on(
    try_page: bool,
) -> None:
    gateway, _ = _gateway(auth=False, try_page=try_page)
    call = rpc("memory/recall", {"query": "deploy keys", "limit": 1})
    async with asgi_client(gateway) as http:
        own = await http.post("/a2m/docs", json=call, headers={"origin": "http://localhost"})
        other_port = await http.post(
            "/a2m/docs", json=call, headers={"origin": "http://localhost:9999"}
        )
        rebinding = await http.post(
            "/a2m/docs", json=call, headers={"origin": "http://evil.example"}
        )
    assert own.status_code == (200 if try_page else 403)
    assert other_port.status_code == 403
    assert rebinding.status_code == 403
