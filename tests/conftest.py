"""Shared fixtures: where the real engines are, and the SciFact collection.

Engines are started outside pytest by ``tests/engines/engines.py start`` (the
test command in README.md does it) and found through A2M_TEST_*_URL. A missing
engine skips its tests on a developer's machine, but fails them when
A2M_REQUIRE_ENGINES=1 (set by the test command), so CI can never pass by
skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SCIFACT_DIR = Path(
    os.environ.get("A2M_SCIFACT_DIR", Path(__file__).resolve().parents[2] / "shared/data/scifact")
)


def _engine_url(var: str) -> str:
    url = os.environ.get(var)
    if url:
        return url
    if os.environ.get("A2M_REQUIRE_ENGINES") == "1":
        pytest.fail(f"{var} is not set but A2M_REQUIRE_ENGINES=1: the engine was not started")
    pytest.skip(f"{var} not set (start engines with: python tests/engines/engines.py start)")


@pytest.fixture(scope="session")
def opensearch_url() -> str:
    return _engine_url("A2M_TEST_OPENSEARCH_URL")


@pytest.fixture(scope="session")
def elasticsearch_url() -> str:
    return _engine_url("A2M_TEST_ELASTICSEARCH_URL")


@pytest.fixture(scope="session")
def scifact_dir() -> Path:
    if not (SCIFACT_DIR / "corpus.jsonl").is_file():
        if os.environ.get("A2M_REQUIRE_ENGINES") == "1":
            pytest.fail(f"SciFact not found at {SCIFACT_DIR}")
        pytest.skip(f"SciFact not found at {SCIFACT_DIR} (set A2M_SCIFACT_DIR)")
    return SCIFACT_DIR
