"""bench.route on the embedded demo: the profiled call's route is the request flow's."""

from __future__ import annotations

import pytest

from bench.route import ROOT, Route, project_module, report, trace


def test_only_the_project_packages_count() -> None:
    assert project_module(str(ROOT / "gateway" / "store" / "store.py")) == "gateway/store/store.py"
    assert project_module(str(ROOT / "bench" / "route.py")) is None
    assert project_module(pytest.__file__) is None


async def test_a_recall_runs_down_the_layers_once() -> None:
    route = await trace(None, None, "recall", "how are records ranked")

    for module in (
        "gateway/transports/endpoints.py",
        "gateway/a2m/dispatcher.py",
        "gateway/front/front.py",
        "gateway/store/store.py",
        "connectors/qdrant/searcher.py",
    ):
        assert module in route.calls, module
    assert route.hops[("gateway/transports/endpoints.py", "gateway/a2m/jsonrpc.py")] >= 1
    assert route.hops[("gateway/a2m/jsonrpc.py", "gateway/a2m/dispatcher.py")] >= 1
    # One-way flow: nothing below the dispatcher calls back up into the transports.
    upward = [(a, b) for a, b in route.hops if b.startswith("gateway/transports/")]
    assert all(a.startswith("gateway/transports/") for a, _ in upward), upward
    assert report(route, False).startswith(f"project modules: {len(route.calls)}\n")


async def test_an_mcp_search_reaches_the_same_dispatcher() -> None:
    route: Route = await trace(None, None, "mcp-search", "how are records ranked")

    assert route.hops[("gateway/mcp/tools.py", "gateway/a2m/dispatcher.py")] >= 1
    assert "gateway/a2m/jsonrpc.py" not in route.calls
