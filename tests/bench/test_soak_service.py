"""What callers feel after a fault (bench/soak/service.py): full service, refusals, opens."""

from __future__ import annotations

from collections import Counter

from bench.soak.load import Call
from bench.soak.outcome import HUNG, OK, Verdict
from bench.soak.service import (
    breaker_transitions,
    full_service_s,
    good,
    opens,
    refused_share,
)

GOOD = Verdict(OK, ok=True)
REFUSED = Verdict("-32603 circuit_open")
NOT_FOUND = Verdict("-32001")  # a fetch of a missing key: the caller's error, answered right


def _calls(*spans: tuple[float, float, Verdict], per_s: int = 100) -> list[Call]:
    """``per_s`` calls a second over each (start, end) span, with that verdict."""
    out = []
    for start, end, verdict in spans:
        n = round((end - start) * per_s)
        out += [Call("s", "fetch", start + i / per_s, 0.01, verdict) for i in range(n)]
    return out


def test_good_is_a_result_or_a_callers_error_never_engine_trouble() -> None:
    assert [good(Call("s", "k", 0, 0, v)) for v in (GOOD, NOT_FOUND, REFUSED, HUNG)] == [
        True,
        True,
        False,
        False,
    ]


def test_full_service_starts_after_the_last_short_window() -> None:
    # Back at 10 s; refused until 11.5 s, then one refusal at 13.0 s among good calls.
    calls = _calls((10.0, 11.5, REFUSED), (11.5, 20.0, GOOD))
    calls.append(Call("s", "fetch", 13.0, 0.01, REFUSED))
    # 1 bad call in 100 keeps a window at 99 %: only the first 1.5 s count.
    assert full_service_s(calls, "s", 10.0, 20.0) == 1.5
    calls += [Call("s", "fetch", 13.0 + i / 1000, 0.01, REFUSED) for i in range(1, 3)]
    # Now every window from [12.1, 13.1) to [13.0, 14.0) holds 3 refusals: full service
    # begins with the window at 13.1 s.
    assert full_service_s(calls, "s", 10.0, 20.0) == 3.1


def test_no_full_service_when_the_phase_ends_short_and_other_stores_do_not_count() -> None:
    calls = _calls((10.0, 20.0, GOOD))
    calls += [Call("s", "fetch", 19.5, 0.01, REFUSED) for _ in range(3)]
    assert full_service_s(calls, "s", 10.0, 20.0) is None
    other = [Call("t", "fetch", c.started, 0.01, REFUSED) for c in _calls((10.0, 20.0, GOOD))]
    assert full_service_s(_calls((10.0, 20.0, GOOD)) + other, "s", 10.0, 20.0) == 0.0


def test_refused_share_counts_the_stores_calls_started_in_the_phase() -> None:
    calls = _calls((10.0, 11.0, REFUSED), (11.0, 20.0, GOOD), (5.0, 10.0, REFUSED))
    assert refused_share(calls, "s", 10.0, 20.0) == 0.1
    assert refused_share(calls, "t", 10.0, 20.0) is None


def test_transitions_are_read_from_the_metrics_text_and_opens_summed() -> None:
    text = "\n".join(
        [
            "# TYPE a2m_engine_breaker_transitions_total counter",
            'a2m_engine_breaker_transitions_total{from="closed",store="os",to="open"} 2.0',
            'a2m_engine_breaker_transitions_total{from="half_open",store="os",to="closed"} 1.0',
            'a2m_engine_breaker_transitions_created{from="closed",store="os",to="open"} 1.7e9',
            'a2m_engine_breaker_transitions_total{from="closed",store="es",to="open"} 1.0',
        ]
    )
    seen = breaker_transitions(text)
    assert seen == {
        "os": Counter({"closed->open": 2, "half_open->closed": 1}),
        "es": Counter({"closed->open": 1}),
    }
    assert opens(seen, {"os": Counter({"closed->open": 1})}, store="os") == 3
    assert opens(seen, store="nobody") == 0
