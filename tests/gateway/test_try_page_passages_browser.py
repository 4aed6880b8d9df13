"""The try page shows where a recalled passage sits (headless Chromium, a real `serve`).

A store with ``search.passages`` over long records: each card names the passage's
character ranges in the whole content and links the record's ``uri`` at the passage.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
import yaml

from tests.conformance.conftest import HttpServer, start_http_server
from tests.security.support import SPARSE, write_qdrant
from tests.support.browser import chromium, records, screenshot, settled

pytestmark = pytest.mark.integration

FILLER = "This sentence only pads the handbook page and says nothing of use. "
ANSWER = "Refunds are paid within thirty days of the returned parcel arriving."


def _docs() -> list[tuple[int, dict[str, Any]]]:
    text = FILLER * 20 + ANSWER + " " + FILLER * 20
    return [
        (1, {"text": text, "key": "handbook", "uri": "https://wiki.example/handbook"}),
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("try-passages")
    write_qdrant(root / "wiki", "wiki", _docs(), "text")
    doc = {
        "server": {"request_timeout_ms": 120_000},
        "stores": {
            "wiki": {
                "backend": "qdrant",
                "index": "wiki",
                "connection": {"path": str(root / "wiki")},
                "mapping": {"content": "text", "key": "key", "uri": "uri"},
                "search": {
                    "mode": "lexical",
                    "sparse_vector": SPARSE,
                    "passages": {"max_chars": 200, "count": 1},
                },
            }
        },
    }
    config = root / "wiki.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    srv = start_http_server(root / "data", config)
    yield srv
    srv.stop()


def test_a_recalled_passage_shows_its_position_and_a_link_to_it(server: HttpServer) -> None:
    with chromium() as driver:
        driver.get(server.base_url + "/")
        settled(driver)
        box = driver.find_element("id", "query")
        box.clear()
        box.send_keys("when are refunds paid")
        driver.find_element("id", "run").click()
        settled(driver)
        [card] = records(driver)
        assert ANSWER in card["content"]
        assert len(card["content"]) <= 200
        start = len(FILLER) * 20
        ranges = card["passage"].removeprefix("characters ").split(" of ")
        assert ranges[1] == str(len(FILLER) * 40 + len(ANSWER) + 1)
        lo, hi = (int(x) for x in ranges[0].split("\u2013"))
        assert lo <= start < start + len(ANSWER) <= hi
        link = driver.find_element("css selector", "#records li.record a.passage-link")
        href = unquote(str(link.get_attribute("href")))
        assert href.startswith("https://wiki.example/handbook#:~:text=")
        assert card["content"].split()[0] in href
        screenshot(driver, "passage-position")
