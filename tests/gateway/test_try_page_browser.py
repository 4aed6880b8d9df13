"""The try page in a real browser (headless Chromium) against a real `a2m-gateway serve`.

Two servers: an open one (the demo, two Qdrant stores in process and their federation)
and one with `server.auth` (API keys) serving a store scoped by the caller's groups.
Assertions read the DOM; each test keeps a full-page screenshot (tests/support/browser.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gateway.demo import chunks, default_demo_config
from gateway.security.auth import hash_api_key
from tests.conformance.conftest import HttpServer, start_http_server
from tests.security.support import BOB_KEY, CAROL_KEY, SPARSE, write_qdrant
from tests.support.browser import (
    chromium,
    options,
    preview_pairs,
    records,
    screenshot,
    settled,
    severe_console,
    shown,
    text,
)
from tests.support.qdrant_pair import write_qdrant_pair

pytestmark = pytest.mark.integration

UNMAPPED = "classified-note-q7"
"""A payload value of a field the team store does not map: it must never reach the page."""
SLOW_MACHINE_MS = 120_000
"""The servers' request deadline: what is tested is the page, not the deadline, and a loaded
CI machine can take longer than the default 10 s to open an in-process store or embed a query."""
PASSAGE_KEY = "demo/recall/passages-from-long-documents"
"""The demo's section longer than the store's max_chars."""
MARKUP = '<img src="/nowhere.png" onerror="window.pwned = 1">'
"""In one record's content: the page must show it as text, never run or load it."""


def _team_docs() -> list[tuple[int, dict[str, Any]]]:
    """Six notes on deploy keys: 0, 2, 4 for team-a, 1, 3, 5 for team-b."""
    return [
        (
            i + 1,
            {
                "text": f"{team} note {i} about rotating deploy keys" + (MARKUP if i == 5 else ""),
                "key": f"{team}/{i}",
                "created_at": f"2026-02-0{i + 1}T00:00:00Z",
                "acl": [team],
                "secret_note": f"{UNMAPPED}-{i}",
            },
        )
        for i in range(6)
        for team in (("team-a", "team-b")[i % 2],)
    ]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("try-open")
    doc = default_demo_config(root / "data").model_dump(mode="json", exclude_none=True)
    doc["stores"].update(write_qdrant_pair(root / "pair"))
    doc["federations"] = {"both": {"members": ["left", "right"]}}
    doc.setdefault("server", {})["request_timeout_ms"] = SLOW_MACHINE_MS
    config = root / "open.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    server = start_http_server(root / "data", config)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("try-auth")
    write_qdrant(root / "team", "team", _team_docs(), "text")
    doc = {
        "server": {
            "request_timeout_ms": SLOW_MACHINE_MS,
            "auth": {
                "api_keys": [
                    {
                        "subject": "bob",
                        "hash": hash_api_key(BOB_KEY),
                        "claims": {"groups": ["team-b"]},
                    },
                    {"subject": "carol", "hash": hash_api_key(CAROL_KEY)},
                ]
            },
        },
        "stores": {
            "team": {
                "backend": "qdrant",
                "index": "team",
                "connection": {"path": str(root / "team")},
                "mapping": {"content": "text", "key": "key", "created_at": "created_at"},
                "search": {"mode": "lexical", "sparse_vector": SPARSE},
                "scope": {"filters": [{"field": "acl", "claims": ["groups"]}]},
            }
        },
    }
    config = root / "auth.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    server = start_http_server(root / "data", config)
    yield server
    server.stop()


def _open(driver: Any, url: str) -> None:
    driver.get(url)
    settled(driver)


def _fill(driver: Any, element_id: str, value: str) -> None:
    box = driver.find_element("id", element_id)
    box.clear()
    box.send_keys(value)


def _choose(driver: Any, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", select_id)).select_by_value(value)
    settled(driver)


def _run(driver: Any) -> None:
    driver.find_element("id", "run").click()
    settled(driver)


def _connect(driver: Any, credential: str) -> None:
    _fill(driver, "cred", credential)
    driver.find_element("id", "connect").click()
    settled(driver)


def test_a_query_on_the_demo(browser: Any, open_server: HttpServer) -> None:
    _open(browser, open_server.base_url + "/")  # a browser at / gets the page
    assert browser.title == "a2m-gateway: try a store"
    assert options(browser, "store") == ["demo", "left", "right", "both"]
    assert text(browser, "status") == "3 stores and 1 federation on this server."
    assert options(browser, "mode") == ["recall", "timeline", "fetch"]
    assert "hybrid" in text(browser, "store-info") or "lexical" in text(browser, "store-info")
    _fill(browser, "query", "how are scores normalised?")
    _fill(browser, "limit", "3")
    _run(browser)
    assert not shown(browser, "error"), text(browser, "error")
    found = records(browser)
    assert len(found) == 3
    assert text(browser, "record-count") == "(3)"
    for record in found:
        assert record["uri"].startswith("gateway/demo/corpus/")
        assert record["key"].startswith("demo/")
        assert record["media_type"] == "text/markdown"
        assert record["created_at"].startswith("2026-")
        assert 0.0 <= float(record["score"]) <= 1.0
        assert '"title"' in record["metadata"]
        assert record["content"]
    assert any("Scores" in r["title"] for r in found)
    # The prompt block cites each record by its uri; MCP search lists the same records.
    prompt = text(browser, "prompt")
    for record in found:
        assert f"[{record['uri']}]" in prompt
    assert text(browser, "mcp-tool") == "search"
    mcp = text(browser, "mcp-text")
    assert mcp.startswith("[1] ")
    for record in found:
        assert record["uri"] in mcp
    # The mapping preview: each document as read, beside the record it became.
    pairs = preview_pairs(browser)
    assert len(pairs) == 3
    for document, mapped in pairs:
        assert mapped["id"] == document["id"]
        assert mapped["content"] == document["source"]["content"]
        assert mapped["metadata"]["title"] == document["source"]["title"]
    # Content reads as prose: the corpus's hard line breaks are not kept inside a paragraph;
    # the preview shows a string's line breaks as breaks, never as \n escapes.
    paragraphs = browser.find_elements("css selector", "#records li.record .content p")
    assert paragraphs
    assert all("\n" not in p.text for p in paragraphs)
    cells = browser.find_elements("css selector", "#preview-table tbody td pre")
    assert cells
    assert all("\\n" not in str(c.get_attribute("textContent")) for c in cells)
    # The footer's docs are links: those this server serves, and the draft's address.
    links = {
        a.text: str(a.get_attribute("href"))
        for a in browser.find_elements("css selector", "#server-docs a")
    }
    assert links["readme"].endswith("/docs/readme")
    assert links["spec"].startswith("https://")
    screenshot(browser, "demo-query")
    assert severe_console(browser) == []  # no CSP violation, no failed request


def test_a_where_key_the_store_cannot_test_is_named(browser: Any, open_server: HttpServer) -> None:
    _open(browser, open_server.base_url + "/try")
    _fill(browser, "query", "read only")
    _fill(browser, "where", '{"grop": "recall"}')
    _run(browser)
    assert not shown(browser, "error"), text(browser, "error")
    assert records(browser) == []
    assert shown(browser, "where-note")
    assert text(browser, "where-note") == (
        "where.grop matched nothing: store demo cannot test it "
        "(keys it can test: id, key, group, uri, media_type, title)"
    )
    # Control: a key the store can test filters, and no note is shown.
    _fill(browser, "where", '{"group": "recall"}')
    _run(browser)
    assert not shown(browser, "where-note")
    assert records(browser)
    assert severe_console(browser) == []


def test_fetch_by_key_on_the_demo(browser: Any, open_server: HttpServer) -> None:
    _open(browser, open_server.base_url + "/try")
    _choose(browser, "mode", "fetch")
    _fill(browser, "query", "demo/recall/scores")
    _run(browser)
    [record] = records(browser)
    assert record["key"] == "demo/recall/scores"
    assert text(browser, "mcp-tool") == "fetch"
    assert "demo/recall/scores" in text(browser, "mcp-text") or "Scores" in text(
        browser, "mcp-text"
    )


def test_the_demo_recalls_a_long_section_as_its_passages_and_shows_where(
    browser: Any, open_server: HttpServer
) -> None:
    section = next(c for c in chunks() if c.key == PASSAGE_KEY).content
    assert len(section) > 600  # the demo store's max_chars: the section is cut
    _open(browser, open_server.base_url + "/try")
    _fill(browser, "query", "how is a long document cut to the passage that answers?")
    _fill(browser, "limit", "3")
    _run(browser)
    assert not shown(browser, "error"), text(browser, "error")
    [card] = [r for r in records(browser) if r.get("key") == PASSAGE_KEY]
    where, whole = card["passage"].removeprefix("characters ").split(" of ")
    assert int(whole) == len(section)
    pieces = []
    for span in where.split(", "):
        lo, hi = (int(x) for x in span.split("\u2013"))
        assert 0 <= lo < hi <= len(section)
        pieces.append(" ".join(section[lo:hi].split()))
    assert " ".join(card["content"].split()) == " … ".join(pieces)
    assert len(card["content"]) <= 600
    screenshot(browser, "demo-passage")
    # Fetched by key, the same section is whole and has no passage.
    _choose(browser, "mode", "fetch")
    _fill(browser, "query", PASSAGE_KEY)
    _run(browser)
    [fetched] = records(browser)
    assert "passage" not in fetched
    assert " ".join(fetched["content"].split()) == " ".join(section.split())


def test_a_federation(browser: Any, open_server: HttpServer) -> None:
    _open(browser, open_server.base_url + "/try")
    _choose(browser, "store", "both")
    assert "both" in text(browser, "store-info") or "federated" in text(browser, "store-info")
    _fill(browser, "query", "harbour cranes")
    _run(browser)
    assert not shown(browser, "error"), text(browser, "error")
    keys = [r["key"] for r in records(browser)]
    assert {k.split("/")[0] for k in keys} == {"left", "right"}
    assert len(keys) == 6
    assert text(browser, "mcp-text").startswith("[1] ")
    assert not shown(browser, "preview")  # a federation has no documents of its own
    screenshot(browser, "federation")
    assert severe_console(browser) == []


def test_an_authenticated_store(browser: Any, auth_server: HttpServer) -> None:
    _open(browser, auth_server.base_url + "/")
    # No credential: the page names no store.
    assert options(browser, "store") == []
    assert "needs a credential" in text(browser, "status")
    assert not shown(browser, "results")

    _connect(browser, "a2m_wrong-key-0123456789-abcdefghijklmnopqrstuvwxyz")
    assert shown(browser, "error")
    assert "refused" in text(browser, "error")
    assert "HTTP 401" in text(browser, "error")
    assert options(browser, "store") == []
    screenshot(browser, "auth-wrong-key")

    _connect(browser, BOB_KEY)
    assert not shown(browser, "error"), text(browser, "error")
    assert options(browser, "store") == ["team"]
    assert text(browser, "status") == "1 store on this server."
    assert "scoped" in text(browser, "store-info")
    _fill(browser, "query", "deploy keys")
    _run(browser)
    found = records(browser)
    assert len(found) == 3
    assert all(r["key"].startswith("team-b/") for r in found)
    assert "team-a" not in text(browser, "records")
    assert "team-a" not in text(browser, "mcp-text")
    assert "team-b/" in browser.find_element("id", "mcp-json").get_attribute("textContent")
    # Record content is text: the markup in team-b/5 is shown, not parsed, loaded or run.
    [marked] = [r for r in found if r["key"] == "team-b/5"]
    assert marked["content"].endswith(MARKUP)
    assert browser.execute_script("return window.pwned") is None
    assert browser.find_elements("css selector", "#records img") == []
    pairs = preview_pairs(browser)
    assert len(pairs) == 3
    assert all(doc["source"]["key"].startswith("team-b/") for doc, _ in pairs)
    page = str(browser.page_source)
    assert UNMAPPED not in page  # the engine is asked for mapped fields only
    assert "acl" not in [k for doc, _ in pairs for k in doc["source"]]
    screenshot(browser, "auth-right-key")
    # Only the anonymous discovery (401) and the refused key failed to load.
    assert severe_console(browser, allow=("401",)) == []


def test_a_store_the_caller_may_not_see(browser: Any, auth_server: HttpServer) -> None:
    _open(browser, auth_server.base_url + "/try")
    _connect(browser, CAROL_KEY)  # authenticated, but in no group the store admits
    assert options(browser, "store") == ["team"]
    _fill(browser, "query", "deploy keys")
    _run(browser)
    assert not shown(browser, "error"), text(browser, "error")
    assert records(browser) == []
    assert text(browser, "record-count") == "(0)"
    assert "No records" in text(browser, "records")
    assert "No matching records" in text(browser, "mcp-text")
    assert text(browser, "prompt") == "(empty: no record to cite)"
    assert preview_pairs(browser) == []
    assert "No documents visible" in text(browser, "preview-table")
    page = str(browser.page_source)
    assert "team-a/" not in page
    assert "team-b/" not in page
    screenshot(browser, "auth-not-visible")
