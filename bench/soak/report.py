"""From the recorded calls and phases to the soak's report: a JSON-able dict and a table.

A call belongs to the phase it ended in (where its answer was seen). After a fault
phase the report gives what callers feel (bench/soak/service.py): the time to full
service, the share of the store's calls refused in the healthy phase after it and the
breaker's opens; beside them, the **first good answer**: the time from the phase's end
(the node is back) to the end of the first call to that node's store that started after
it and answered with a result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bench.soak.faults import Phase
from bench.soak.load import Call
from bench.soak.outcome import HANG
from bench.soak.service import full_service_s, opens, refused_share

RECOVERY_TARGET_S = 5.0
FULL_SERVICE_TARGET_S = 2.0
REFUSED_TARGET = 0.05
OPENS_TARGET = 1
RSS_GROWTH_TARGET = 0.10


def percentile_ms(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile in ms (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return round(ordered[rank - 1] * 1000.0, 1)


def _phase_of(phases: Sequence[Phase], started: float) -> int:
    for phase in reversed(phases):
        if started >= phase.start:
            return phase.index
    return 0


def recovery_s(calls: Sequence[Call], store: str, since: float) -> float | None:
    """Seconds from ``since`` to the end of the first good answer of ``store`` begun after it."""
    ends = [
        c.started + c.elapsed
        for c in calls
        if c.store == store and c.started >= since and c.verdict.ok
    ]
    return round(min(ends) - since, 2) if ends else None


def _after_fault(
    phase: Phase, after: Phase | None, all_calls: Sequence[Call], store: str
) -> dict[str, Any]:
    """What the store's callers felt once the node was back (None: no healthy phase ran)."""
    if after is None:
        return {"full_service_s": None, "refused_after": None, "opens": None}
    return {
        "full_service_s": full_service_s(all_calls, store, phase.end, after.end),
        "refused_after": refused_share(all_calls, store, phase.end, after.end),
        "opens": opens(phase.breakers, after.breakers, store=store),
    }


def _phase_row(
    phase: Phase,
    calls: Sequence[Call],
    all_calls: Sequence[Call],
    store_of: Mapping[str, str],
    after: Phase | None = None,
) -> dict[str, Any]:
    answered = [c.elapsed for c in calls if c.verdict.label != HANG]
    row: dict[str, Any] = {
        "index": phase.index,
        "cut": phase.cut,
        "phase": phase.name,
        "kind": phase.kind,
        "node": phase.node,
        "start_s": round(phase.start, 1),
        "seconds": round(phase.end - phase.start, 1),
        "requests": len(calls),
        "ok": sum(c.verdict.ok for c in calls),
        "answers": dict(Counter(c.verdict.label for c in calls).most_common()),
        "answers_by_store": {
            s: dict(Counter(c.verdict.label for c in calls if c.store == s).most_common())
            for s in sorted({c.store for c in calls})
        },
        "p50_ms": percentile_ms(answered, 50),
        "p99_ms": percentile_ms(answered, 99),
        "hangs": sum(c.verdict.label == HANG for c in calls),
        "engine_requests": {n: c["seen"] for n, c in phase.proxy_counts.items()},
        "proxy": {n: dict(c) for n, c in phase.proxy_counts.items()},
        "breakers": {s: dict(c) for s, c in phase.breakers.items()},
    }
    if phase.node is not None and not phase.cut:
        store = store_of[phase.node]
        row["store"] = store
        row["recovery_s"] = recovery_s(all_calls, store, phase.end)
        row.update(_after_fault(phase, after, all_calls, store))
    return row


def build(
    calls: Sequence[Call],
    phases: Sequence[Phase],
    store_of: Mapping[str, str],
    *,
    rss_mib: Mapping[str, float | None],
    meta: Mapping[str, Any],
) -> dict[str, Any]:
    """The report: totals, one row per phase, wrong answers, RSS and the targets."""
    by_phase: dict[int, list[Call]] = {p.index: [] for p in phases}
    for call in calls:
        by_phase[_phase_of(phases, call.started + call.elapsed)].append(call)
    rows = [
        _phase_row(p, by_phase[p.index], calls, store_of, _healthy_after(phases, i))
        for i, p in enumerate(phases)
    ]
    wrong = [c for c in calls if not c.verdict.canonical and c.verdict.label != HANG]
    leaks = [c for c in calls if c.verdict.leak]
    hangs = sum(c.verdict.label == HANG for c in calls)
    start, end = rss_mib.get("start"), rss_mib.get("end")
    growth = (end - start) / start if start and end else None
    targets = _targets(rows, hangs=hangs, wrong=len(wrong), leaks=len(leaks), growth=growth)
    return {
        **meta,
        "requests": len(calls),
        "ok": sum(c.verdict.ok for c in calls),
        "answers": dict(Counter(c.verdict.label for c in calls).most_common()),
        "hangs": hangs,
        "wrong": dict(Counter(f"{c.verdict.label}: {c.verdict.why}" for c in wrong)),
        "leaks": len(leaks),
        "rss_mib": dict(rss_mib),
        "rss_growth": None if growth is None else round(growth, 4),
        "phases": rows,
        "targets": targets,
        "passed": all(t["pass"] for t in targets),
    }


def _targets(
    rows: Sequence[Mapping[str, Any]], *, hangs: int, wrong: int, leaks: int, growth: float | None
) -> list[dict[str, Any]]:
    """Each target, what the run measured against it, and whether it was met."""
    recoveries = [r["recovery_s"] for r in rows if "recovery_s" in r]
    worst = None if None in recoveries else max(recoveries, default=0.0)
    faulted = [r for r in rows if "recovery_s" in r]
    service = [r["full_service_s"] for r in faulted]
    worst_service = None if None in service else max(service, default=0.0)
    refused = [r["refused_after"] or 0.0 for r in faulted]
    most_opens = max((r["opens"] or 0 for r in faulted), default=0)
    return [
        _target("hangs", "0", hangs, hangs == 0),
        _target("wrong errors", "0", wrong, wrong == 0),
        _target("leaks", "0", leaks, leaks == 0),
        _target(
            "worst time to full service s",
            f"<= {FULL_SERVICE_TARGET_S:g}",
            "never" if worst_service is None else worst_service,
            worst_service is not None and worst_service <= FULL_SERVICE_TARGET_S,
        ),
        _target(
            "most refused after a fault",
            f"<= {REFUSED_TARGET:.0%}",
            max(refused, default=0.0),
            max(refused, default=0.0) <= REFUSED_TARGET,
        ),
        _target(
            "most breaker opens per fault",
            f"<= {OPENS_TARGET}",
            most_opens,
            most_opens <= OPENS_TARGET,
        ),
        _target(
            "worst first good answer s",
            f"<= {RECOVERY_TARGET_S:g}",
            "never" if worst is None else worst,
            worst is not None and worst <= RECOVERY_TARGET_S,
        ),
        _target(
            "RSS growth",
            f"<= {RSS_GROWTH_TARGET:.0%}",
            None if growth is None else round(growth, 3),
            growth is not None and growth <= RSS_GROWTH_TARGET,
        ),
    ]


def _healthy_after(phases: Sequence[Phase], i: int) -> Phase | None:
    """The healthy phase right after phase ``i``, when it ran."""
    if i + 1 < len(phases) and phases[i + 1].node is None:
        return phases[i + 1]
    return None


def _target(name: str, target: str, value: Any, ok: bool) -> dict[str, Any]:
    return {"name": name, "target": target, "value": value, "pass": ok}


def _answers_text(answers: Mapping[str, int]) -> str:
    return ", ".join(f"{label} {n}" for label, n in answers.items() if label != "ok") or "-"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def markdown(report: Mapping[str, Any]) -> str:
    """The per-phase table, the totals and the targets, as markdown."""
    lines = [
        "| # | phase | s | requests | ok | other answers | p50 ms | p99 ms | hangs "
        "| engine requests | full service s | refused after | opens | first good answer s |",
        "| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: "
        "| ---: | ---: |",
    ]
    for r in report["phases"]:
        engine = ", ".join(f"{n} {c}" for n, c in r["engine_requests"].items())
        name = f"{r['phase']} (cut)" if r["cut"] else r["phase"]
        lines.append(
            f"| {r['index']} | {name} | {r['seconds']} | {r['requests']} | {r['ok']} "
            f"| {_answers_text(r['answers'])} | {_cell(r['p50_ms'])} | {_cell(r['p99_ms'])} "
            f"| {r['hangs']} | {engine} | {_cell(r.get('full_service_s'))} "
            f"| {_share(r.get('refused_after'))} | {_cell(r.get('opens'))} "
            f"| {_cell(r.get('recovery_s'))} |"
        )
    rss = report["rss_mib"]
    lines += [
        "",
        f"Requests {report['requests']}, ok {report['ok']}; answers: "
        + ", ".join(f"{k} {v}" for k, v in report["answers"].items())
        + f". Gateway RSS {_cell(rss.get('ready'))} MiB at ready, {_cell(rss.get('start'))} "
        f"after the baseline, {_cell(rss.get('end'))} at the end (max {_cell(rss.get('max'))}).",
    ]
    if report["wrong"]:
        lines.append("Wrong answers: " + "; ".join(f"{k} x{v}" for k, v in report["wrong"].items()))
    lines += ["", "| target | goal | measured | pass |", "| --- | --- | --- | --- |"]
    for t in report["targets"]:
        verdict = "pass" if t["pass"] else "FAIL"
        lines.append(f"| {t['name']} | {t['target']} | {_cell(t['value'])} | {verdict} |")
    return "\n".join(lines)
