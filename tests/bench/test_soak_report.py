"""The soak's report (bench/soak/report.py): which phase a call counts in, recovery, targets."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.soak.faults import Phase
from bench.soak.load import Call
from bench.soak.outcome import HUNG, OK, Verdict
from bench.soak.report import build, markdown

GOOD = Verdict(OK, ok=True)
TROUBLE = Verdict("-32603 engine_unavailable")
WRONG = Verdict("http 500", canonical=False, why="not a JSON-RPC body")


def _phases(*, cut_last: bool = False) -> list[Phase]:
    counts = {"opensearch": Counter(seen=3)}
    return [
        Phase(0, "healthy", None, 0.0, 10.0, counts),
        Phase(1, "503", "opensearch", 10.0, 20.0, counts),
        Phase(2, "healthy", None, 20.0, 30.0, counts, cut=cut_last),
    ]


def _report(calls: list[Call], start: float = 100.0, end: float = 105.0) -> dict[str, Any]:
    return build(
        calls,
        _phases(),
        {"opensearch": "opensearch"},
        rss_mib={"ready": 90.0, "start": start, "end": end, "max": end},
        meta={},
    )


def test_calls_count_where_they_end_and_recovery_waits_for_a_result() -> None:
    calls = [
        Call("opensearch", "recall-lexical", 1.0, 0.5, GOOD),
        # Began healthy, answered during the fault: counted in the fault phase.
        Call("opensearch", "recall-lexical", 9.5, 1.0, TROUBLE),
        # Began during the fault, answered after it: no recovery (it started before the end).
        Call("opensearch", "fetch", 19.0, 2.0, GOOD),
        Call("opensearch", "fetch", 20.5, 0.5, TROUBLE),
        Call("opensearch", "recall-hybrid", 21.0, 1.5, GOOD),  # the first good one after
    ]
    report = _report(calls)
    phases = report["phases"]
    assert [p["requests"] for p in phases] == [1, 1, 3]
    assert phases[1]["answers"] == {"-32603 engine_unavailable": 1}
    assert phases[1]["recovery_s"] == 2.5  # 20.0 -> 22.5
    # Of the two calls begun after the fault, one failed: refused 50 %; every window from
    # 20.6 s on holds only the good one.
    assert (phases[1]["full_service_s"], phases[1]["refused_after"]) == (0.6, 0.5)
    assert phases[1]["opens"] == 0
    failed = [t["name"] for t in report["targets"] if not t["pass"]]
    assert failed == ["most refused after a fault"]
    assert report["passed"] is False


def test_wrong_answers_hangs_slow_recovery_and_growth_fail_their_targets() -> None:
    calls = [
        Call("opensearch", "timeline", 12.0, 4.0, HUNG),
        Call("opensearch", "timeline", 13.0, 0.1, WRONG),
        Call("opensearch", "timeline", 26.0, 0.5, GOOD),  # 6.5 s after the node is back
    ]
    report = _report(calls, start=100.0, end=115.0)
    failed = {t["name"] for t in report["targets"] if not t["pass"]}
    assert failed == {
        "hangs",
        "wrong errors",
        "worst first good answer s",
        "RSS growth",
    }
    assert report["wrong"] == {"http 500: not a JSON-RPC body": 1}
    assert "| worst first good answer s | <= 5 | 6.5 | FAIL |" in markdown(report)


def test_no_good_answer_after_a_fault_is_no_recovery() -> None:
    report = _report([Call("opensearch", "fetch", 21.0, 0.1, TROUBLE)])
    worst = next(t for t in report["targets"] if t["name"] == "worst first good answer s")
    assert (worst["value"], worst["pass"]) == ("never", False)


def test_a_phase_cut_by_the_end_of_the_load_has_no_recovery() -> None:
    phases = _phases()
    phases[1].cut = True
    report = build(
        [Call("opensearch", "fetch", 1.0, 0.1, GOOD)],
        phases,
        {"opensearch": "opensearch"},
        rss_mib={"start": 100.0, "end": 100.0},
        meta={},
    )
    rows = report["phases"]
    assert "recovery_s" not in rows[1]
    assert "full_service_s" not in rows[1]
    assert "| 1 | 503 opensearch (cut) |" in markdown(report)


def test_a_breaker_that_opens_again_after_the_fault_fails_its_target() -> None:
    phases = _phases()
    phases[1].breakers = {"opensearch": Counter({"closed->open": 1, "half_open->open": 4})}
    phases[2].breakers = {"opensearch": Counter({"half_open->closed": 2, "closed->open": 1})}
    calls = [Call("opensearch", "fetch", 21.0, 0.1, GOOD)]
    report = build(calls, phases, {"opensearch": "opensearch"}, rss_mib={}, meta={})
    assert report["phases"][1]["opens"] == 2  # the fault's, and one flap after it
    opens = next(t for t in report["targets"] if t["name"] == "most breaker opens per fault")
    assert (opens["value"], opens["pass"]) == (2, False)
