"""The circuit breaker's state machine, on an injected clock (no engine, no waiting)."""

from __future__ import annotations

import pytest

from gateway.a2m.dispatcher import to_a2m_error
from gateway.config import ConfigError, parse_config
from gateway.resilience import BreakerState, CircuitBreaker, CircuitOpen
from gateway.resilience.breaker import BreakerPolicy, Outcome, Ticket
from tests.support.resilience import FakeClock, state
from tests.support.wire import assert_valid

S, F, N = Outcome.SUCCESS, Outcome.FAILURE, Outcome.NEUTRAL
POLICY = BreakerPolicy(failure_threshold=3, window_s=10.0, open_s=1.0, max_open_s=4.0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def breaker(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(POLICY, clock)


def fail(b: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        b.record(b.admit(), F)


def refused_after(b: CircuitBreaker) -> int:
    with pytest.raises(CircuitOpen) as info:
        b.admit()
    return info.value.retry_after_ms


def test_it_opens_after_the_threshold_of_consecutive_failures(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    assert state(breaker) is BreakerState.CLOSED
    fail(breaker, 1)
    assert state(breaker) is BreakerState.OPEN
    assert refused_after(breaker) == 1000


def test_a_success_between_failures_starts_the_count_again(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    breaker.record(breaker.admit(), S)
    fail(breaker, 2)
    assert state(breaker) is BreakerState.CLOSED
    fail(breaker, 1)
    assert state(breaker) is BreakerState.OPEN


def test_failures_spread_wider_than_the_window_do_not_open_it(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 2)
    clock.now += 10.5  # the streak is older than the window: this failure starts a new one
    fail(breaker, 2)
    assert state(breaker) is BreakerState.CLOSED
    fail(breaker, 1)
    assert state(breaker) is BreakerState.OPEN


def test_neutral_outcomes_neither_count_nor_reset(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    breaker.record(breaker.admit(), N)
    fail(breaker, 1)
    assert state(breaker) is BreakerState.OPEN


def test_retry_after_counts_down_to_the_probe(breaker: CircuitBreaker, clock: FakeClock) -> None:
    fail(breaker, 3)
    clock.now += 0.25
    assert refused_after(breaker) == 750
    clock.now += 0.75
    assert state(breaker) is BreakerState.HALF_OPEN


def test_half_open_lets_one_probe_through_and_its_success_closes(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    moves: list[tuple[BreakerState, BreakerState]] = []
    breaker.on_transition(lambda a, b: moves.append((a, b)))
    fail(breaker, 3)
    clock.now += 1.0
    probe = breaker.admit()
    assert probe.probe
    assert refused_after(breaker) == 1000  # a second caller waits for the probe's verdict
    breaker.record(probe, S)
    assert state(breaker) is BreakerState.CLOSED
    assert not breaker.admit().probe
    assert moves == [
        (BreakerState.CLOSED, BreakerState.OPEN),
        (BreakerState.OPEN, BreakerState.HALF_OPEN),
        (BreakerState.HALF_OPEN, BreakerState.CLOSED),
    ]


def test_a_failed_probe_reopens_with_a_doubled_wait_up_to_the_cap(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 3)
    waits = []
    for _ in range(4):
        clock.now += 10.0
        breaker.record(breaker.admit(), F)
        assert state(breaker) is BreakerState.OPEN
        waits.append(refused_after(breaker))
    assert waits == [2000, 4000, 4000, 4000]
    clock.now += 4.0
    breaker.record(breaker.admit(), S)
    fail(breaker, 3)  # closed again: the wait starts over from open_s
    assert refused_after(breaker) == 1000


def test_a_probe_with_no_verdict_frees_the_probe_slot(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 3)
    clock.now += 1.0
    breaker.record(breaker.admit(), N)  # its caller went away
    assert state(breaker) is BreakerState.HALF_OPEN
    assert breaker.admit().probe


def test_late_outcomes_of_calls_admitted_while_closed_change_nothing(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    early = [breaker.admit() for _ in range(2)]
    fail(breaker, 3)
    breaker.record(early[0], S)  # answered after the breaker opened
    assert state(breaker) is BreakerState.OPEN
    clock.now += 1.0
    probe = breaker.admit()
    breaker.record(early[1], S)
    assert state(breaker) is BreakerState.HALF_OPEN  # only the probe decides
    breaker.record(probe, F)
    assert state(breaker) is BreakerState.OPEN
    assert early[1] == Ticket(probe=False)


def test_once_closed_only_new_failures_reopen_it(breaker: CircuitBreaker, clock: FakeClock) -> None:
    moves: list[tuple[BreakerState, BreakerState]] = []
    breaker.on_transition(lambda a, b: moves.append((a, b)))
    stuck = [breaker.admit() for _ in range(5)]  # under way when the engine fails
    fail(breaker, 3)
    clock.now += 1.0
    breaker.record(breaker.admit(), S)  # the probe closes it
    for ticket in stuck:  # they fail only now, on what the fault left behind
        breaker.record(ticket, F)
    assert state(breaker) is BreakerState.CLOSED
    fail(breaker, 2)
    assert state(breaker) is BreakerState.CLOSED
    fail(breaker, 1)  # the third new failure
    assert state(breaker) is BreakerState.OPEN
    opened = (BreakerState.CLOSED, BreakerState.OPEN)
    assert moves.count(opened) == 2


def test_circuit_open_is_retryable_engine_trouble_on_the_wire() -> None:
    err = to_a2m_error(CircuitOpen(retry_after_ms=1234))
    assert int(err.code) == -32603
    assert err.data == {"reason": "circuit_open", "retryable": True, "retry_after_ms": 1234}
    assert "circuit" in err.message
    assert_valid("error", {"code": int(err.code), "message": err.message, "data": err.data})


def _store(resilience: dict[str, object]) -> dict[str, object]:
    return {
        "stores": {
            "s": {
                "backend": "opensearch",
                "index": "i",
                "connection": {"hosts": ["http://127.0.0.1:9200"]},
                "mapping": {"content": "text"},
                "search": {"text_fields": ["text"]},
                "resilience": resilience,
            }
        }
    }


def test_config_defaults_and_its_one_cross_field_rule() -> None:
    cfg = parse_config(_store({})).stores["s"].resilience
    assert (cfg.breaker.failure_threshold, cfg.breaker.open_ms, cfg.breaker.max_open_ms) == (
        5,
        1000,
        4000,
    )
    assert (cfg.shedding.max_inflight, cfg.shedding.max_wait_ms) == (None, 100)
    with pytest.raises(ConfigError, match="max_open_ms"):
        parse_config(_store({"breaker": {"open_ms": 5000, "max_open_ms": 1000}}))
    with pytest.raises(ConfigError, match="failure_threshold"):
        parse_config(_store({"breaker": {"failure_threshold": 0}}))
    with pytest.raises(ConfigError, match="max_wait"):
        parse_config(_store({"shedding": {"max_wait": 10}}))


# -- a health check ending the wait (the guard's watcher) -------------------------------------


def test_a_good_health_check_lets_the_next_call_probe_at_once(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 3)
    assert breaker.waiting
    assert breaker.probe_now() is True
    assert state(breaker) is BreakerState.HALF_OPEN
    ticket = breaker.admit()
    assert ticket.probe
    breaker.record(ticket, S)
    assert state(breaker) is BreakerState.CLOSED


def test_a_health_check_is_trusted_once_per_opening(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 3)
    assert breaker.probe_now() is True
    breaker.record(breaker.admit(), F)  # pings answer, searches fail: the probe it let in failed
    assert state(breaker) is BreakerState.OPEN
    assert breaker.probe_now() is False  # only the timed wait (now doubled) ends this opening
    assert refused_after(breaker) == 2000
    clock.now += 2.0
    breaker.record(breaker.admit(), S)
    assert state(breaker) is BreakerState.CLOSED
    fail(breaker, 3)  # a new opening trusts a health check again
    assert breaker.probe_now() is True


def test_a_health_check_changes_nothing_unless_the_breaker_waits(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    assert breaker.probe_now() is False
    assert state(breaker) is BreakerState.CLOSED
    fail(breaker, 3)
    clock.now += 1.0  # the wait is over: the next call probes anyway
    assert not breaker.waiting
    assert breaker.probe_now() is False
