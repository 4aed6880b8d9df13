"""What the callers of a faulted store feel once its engine is back.

- **Time to full service**: from the instant the node is back (the fault phase's end:
  the proxy relays again, or the killed node is yellow again) to the start of the first
  1-s window in which at least 99 % of the store's calls are good, when every later
  1-s window of the healthy phase that follows is too. Windows start every 0.1 s; a call
  belongs to the window it started in (when the caller asked).
- **Refused share**: of the store's calls started in that healthy phase, the share that
  were not good.
- **Breaker opens**: the store's ``closed -> open`` transitions (from the gateway's
  ``a2m_engine_breaker_transitions_total``) from the start of the fault to the end of the
  healthy phase after it: 1 when it opened for the fault and never flapped afterwards.

A call is good when it got a result or a caller's error (a fetch of a missing key);
engine trouble (any ``-32603``, ``circuit_open`` included), a hang or a wrong answer is
not.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from bench.soak.load import Call

WINDOW_S = 1.0
STEP_S = 0.1
GOOD_SHARE = 0.99
OPENED = "closed->open"

_TRANSITION = re.compile(r"^a2m_engine_breaker_transitions_total\{(?P<labels>[^}]*)\} (?P<n>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def good(call: Call) -> bool:
    """A result, or a correct answer to the caller's own error."""
    v = call.verdict
    return v.ok or (v.canonical and not v.label.startswith("-32603"))


def _started(calls: Sequence[Call], store: str, since: float, until: float) -> list[Call]:
    return sorted(
        (c for c in calls if c.store == store and since <= c.started < until),
        key=lambda c: c.started,
    )


def full_service_s(calls: Sequence[Call], store: str, since: float, until: float) -> float | None:
    """Seconds from ``since`` to the first window after which every window is good.

    None when the last window of ``[since, until)`` is still short of full service, or
    the span holds no whole window.
    """
    mine = _started(calls, store, since, until)
    starts = [c.started for c in mine]
    bad = [0]
    for c in mine:
        bad.append(bad[-1] + (not good(c)))
    windows = int((until - since - WINDOW_S) / STEP_S + 1e-9) + 1
    last_short = -1
    for k in range(windows):
        lo = bisect.bisect_left(starts, since + k * STEP_S)
        hi = bisect.bisect_left(starts, since + k * STEP_S + WINDOW_S)
        n = hi - lo
        if n and (n - (bad[hi] - bad[lo])) / n < GOOD_SHARE:
            last_short = k
    if windows <= 0 or last_short == windows - 1:
        return None
    return round((last_short + 1) * STEP_S, 1)


def refused_share(calls: Sequence[Call], store: str, since: float, until: float) -> float | None:
    """The share of the store's calls started in ``[since, until)`` that were not good."""
    mine = _started(calls, store, since, until)
    if not mine:
        return None
    return round(sum(not good(c) for c in mine) / len(mine), 4)


def breaker_transitions(metrics_text: str) -> dict[str, Counter[str]]:
    """Per store, the breaker's transitions so far (``"closed->open": 3``), from /metrics."""
    out: dict[str, Counter[str]] = {}
    for line in metrics_text.splitlines():
        m = _TRANSITION.match(line)
        if m is None:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        key = f"{labels.get('from')}->{labels.get('to')}"
        out.setdefault(labels.get("store", ""), Counter())[key] += int(float(m["n"]))
    return out


def opens(*transitions: Mapping[str, Counter[str]], store: str) -> int:
    """The store's ``closed -> open`` transitions over the given phases."""
    return sum(t.get(store, Counter())[OPENED] for t in transitions)
