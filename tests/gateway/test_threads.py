"""The GIL switch interval is shortened only when a store computes in this process."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.threads import SWITCH_INTERVAL_S, computes_in_process, favour_the_loop


@pytest.fixture
def interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _store(**over: Any) -> Any:
    raw: dict[str, Any] = {
        "backend": "opensearch",
        "index": "i",
        "connection": {"hosts": ["http://127.0.0.1:9"]},
        "mapping": {"content": "content"},
        "search": {"text_fields": ["content"]},
        **over,
    }
    return parse_config({"stores": {"s": raw}}).stores["s"]


def test_remote_engines_leave_the_interval_alone(interval: None) -> None:
    store = _store()
    assert not computes_in_process(store)
    favour_the_loop([store])
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_local_mode_shortens_it(interval: None) -> None:
    store = _store(
        backend="qdrant",
        connection={"location": ":memory:"},
        search={"mode": "lexical", "sparse_vector": "s"},
    )
    assert computes_in_process(store)
    favour_the_loop([_store(), store])
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
