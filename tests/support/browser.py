"""Headless Chromium from the Debian packages, driven by Selenium, for the try page's tests.

The driver path is given explicitly, so Selenium Manager never looks for (or downloads) a
driver or a browser. A missing browser skips on a developer's machine and fails in CI
(tests/conftest.py ``missing``). Screenshots go to ``test-artifacts/`` (git-ignored), or to
``$A2M_TEST_ARTIFACTS`` when set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import missing

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 180.0
"""Longest wait for the page to settle (a first recall may load the embedder; CI may be loaded)."""


def artifacts_dir() -> Path:
    root = os.environ.get("A2M_TEST_ARTIFACTS") or str(
        Path(__file__).resolve().parents[2] / "test-artifacts"
    )
    path = Path(root) / "try-page"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium session; skipped (failed in CI) when the Debian packages are absent."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        missing(f"{', '.join(absent)} not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: Any, condition: Callable[[Any], Any], timeout: float = WAIT_S) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def settled(driver: Any) -> None:
    """Until the page has no request in flight (its own ``data-pending`` counter)."""
    wait(driver, lambda d: d.execute_script("return document.body.dataset.pending") == "0")


def text(driver: Any, element_id: str) -> str:
    value: str = driver.find_element("id", element_id).text
    return value


def shown(driver: Any, element_id: str) -> bool:
    return bool(driver.find_element("id", element_id).is_displayed())


def options(driver: Any, select_id: str) -> list[str]:
    found = driver.find_elements("css selector", f"#{select_id} option")
    return [str(o.get_attribute("value")) for o in found]


def records(driver: Any) -> list[dict[str, str]]:
    """Each record card as {field: text}: title, score, uri, key, ..., content."""
    out = []
    for card in driver.find_elements("css selector", "#records li.record"):
        fields = {"title": card.find_element("css selector", ".title").text}
        for row in card.find_elements("css selector", ".field"):
            name = row.find_element("css selector", ".name").text
            fields[name] = row.find_element("css selector", ".value").text
        for cls in ("score", "content"):
            found = card.find_elements("css selector", f".{cls}")
            if found:
                fields[cls] = found[0].text
        out.append(fields)
    return out


def preview_pairs(driver: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The mapping preview's rows: (document, record), each parsed from its cell."""
    rows = driver.find_elements("css selector", "#preview-table tbody tr")
    pairs = []
    for row in rows:
        cells = row.find_elements("css selector", "td pre")
        if len(cells) == 2:
            # textContent: the whole JSON, however the cell wraps or scrolls; a string's line
            # breaks are shown as breaks (strict=False reads them back).
            doc, rec = (
                json.loads(str(c.get_attribute("textContent")), strict=False) for c in cells
            )
            pairs.append((doc, rec))
    return pairs


def severe_console(driver: Any, allow: tuple[str, ...] = ()) -> list[str]:
    """The browser's SEVERE console lines (a CSP violation is one), minus the allowed ones."""
    lines = [str(e["message"]) for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return [m for m in lines if not any(a in m for a in allow)]


def screenshot(driver: Any, name: str) -> Path:
    """The whole page as a PNG artifact."""
    driver.set_window_size(1280, 800)  # the page's own height, not a previous shot's window
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1280, min(max(height + 40, 800), 8000))
    path = artifacts_dir() / f"{name}.png"
    assert driver.save_screenshot(str(path)), path
    assert path.stat().st_size > 0, path
    return path
