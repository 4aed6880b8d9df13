"""The latency benchmark's measurements and their report: blocks, pooled and paired
figures, the markdown table for docs/benchmarks.md and the chart.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.latency.ways import FLOORS
from bench.latency.workload import LIMIT


@dataclass
class Block:
    """One way at one concurrency in one round."""

    way: str
    concurrency: int
    round: int
    latencies_s: list[float]
    wall_s: float
    errors: int
    load: float
    cpu_ms: dict[str, float] = field(default_factory=dict)
    """CPU milliseconds per request of each server process (gateway, peer, engine)."""

    def percentile(self, q: float) -> float:
        return percentile(self.latencies_s, q)

    @property
    def throughput(self) -> float:
        return len(self.latencies_s) / self.wall_s if self.wall_s else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile in milliseconds."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return ordered[rank - 1] * 1000.0


@dataclass
class Report:
    machine: str
    started: str
    requests: int
    rounds: int
    dense_share: float
    concurrency: list[int]
    ways: list[str]
    gateway_ready_s: float
    gateway_rss_mib: float | None
    peer_ready_s: float | None
    peer_rss_mib: float | None
    peer_version: str | None
    load_before: str
    load_after: str = ""
    blocks: list[Block] = field(default_factory=list)
    profile: str | None = None


def _blocks(report: Report, way: str, c: int) -> list[Block]:
    return [b for b in report.blocks if b.way == way and b.concurrency == c]


def _pooled(blocks: Sequence[Block]) -> tuple[float, float, float, int, int, float]:
    """(p50 ms, p99 ms, throughput, requests, errors, mean load) over a way's rounds."""
    lat = [x for b in blocks for x in b.latencies_s]
    wall = sum(b.wall_s for b in blocks)
    return (
        percentile(lat, 50),
        percentile(lat, 99),
        len(lat) / wall if wall else 0.0,
        len(lat),
        sum(b.errors for b in blocks),
        statistics.fmean(b.load for b in blocks) if blocks else 0.0,
    )


def _paired(
    report: Report, num: str, den: str, c: int, metric: Callable[[Block, Block], float]
) -> list[float]:
    a = {b.round: b for b in _blocks(report, num, c)}
    d = {b.round: b for b in _blocks(report, den, c)}
    return [metric(a[r], d[r]) for r in sorted(a) if r in d]


def _cpu(blocks: Sequence[Block], way: str) -> str:
    """Median CPU ms per request of the processes this way goes through: the server in
    front of the engine (the gateway, or a floor server), the peer, the engine."""
    engine = "elasticsearch" if way.startswith("es-") else "opensearch"
    front = way if way in FLOORS else "gateway"
    names = [front] if "gateway" in way or way in ("mcp", *FLOORS) else [way]
    parts = []
    for name in [front, "peer", engine]:
        values = [b.cpu_ms[name] for b in blocks if name in b.cpu_ms]
        if name in (front, "peer") and name not in names:
            parts.append("-")
        elif values:
            part = f"{statistics.median(values):.2f}"
            kernel = [b.cpu_ms["gateway-sys"] for b in blocks if "gateway-sys" in b.cpu_ms]
            if name == "gateway" and kernel:
                part += f" (sys {statistics.median(kernel):.2f})"
            parts.append(part)
        else:
            parts.append("n/a")
    return " / ".join(parts)


def _span(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}..{format(max(values), fmt)})"


CPU_PAIRS = (("gateway", "floor"), ("gateway", "floor-gateway-http"), ("mcp", "gateway"))
"""CPU per request compared: the gateway against the floor with the client's own HTTP
layer and with the gateway's, and an MCP tool call against an A2M recall."""


def _cpu_ratios(report: Report) -> list[str]:
    def front(way: str) -> str:
        return way if way in FLOORS else "gateway"

    rows = []
    for num, den in CPU_PAIRS:
        if num not in report.ways or den not in report.ways:
            continue
        top, bottom = front(num), front(den)

        def ratio(a: Block, d: Block, top: str = top, bottom: str = bottom) -> float:
            return a.cpu_ms.get(top, 0.0) / max(d.cpu_ms.get(bottom, 0.0), 1e-9)

        for c in report.concurrency:
            ratios = [r for r in _paired(report, num, den, c, ratio) if r > 0]
            rows.append(f"| {num} / {den} | {c} | {_span(ratios, '.2f')} |")
    if not rows:
        return []
    head = ["", "CPU per request, ratios within each round (median, and min-max over rounds):"]
    return [*head, "", "| pair | concurrency | CPU ratio |", "| --- | ---: | ---: |", *rows]


LATENCY_PAIRS = (
    ("gateway", "direct"),
    ("gateway", "peer"),
    ("mcp", "peer"),
    ("mcp", "gateway"),
    ("es-gateway", "es-direct"),
)
"""Latency and throughput compared: each way against the one it adds to or replaces."""


def _way_rows(report: Report) -> list[str]:
    lines = [
        "| way | concurrency | p50 ms | p99 ms | throughput req/s | requests | errors "
        "| load (1 min) | CPU ms/req (gateway (kernel share) or floor / peer / engine) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for c in report.concurrency:
        for way in report.ways:
            blocks = _blocks(report, way, c)
            if not blocks:
                continue
            p50, p99, tput, n, err, load = _pooled(blocks)
            lines.append(
                f"| {way} | {c} | {p50:.2f} | {p99:.2f} | {tput:.0f} | {n} | {err} | {load:.2f} "
                f"| {_cpu(blocks, way)} |"
            )
    return lines


def _latency_ratios(report: Report) -> list[str]:
    lines = ["", "Ratios, computed within each round (median, and min-max over rounds):", ""]
    lines += [
        "| pair | concurrency | p50 added ms | p50 ratio | throughput ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for num, den in LATENCY_PAIRS:
        if num not in report.ways or den not in report.ways:
            continue
        for c in report.concurrency:
            added = _paired(report, num, den, c, lambda a, d: a.percentile(50) - d.percentile(50))
            ratio = _paired(
                report, num, den, c, lambda a, d: a.percentile(50) / max(d.percentile(50), 1e-9)
            )
            tputs = _paired(
                report, num, den, c, lambda a, d: a.throughput / max(d.throughput, 1e-9)
            )
            lines.append(
                f"| {num} / {den} | {c} | {_span(added, '+.2f')} | {_span(ratio, '.2f')} | "
                f"{_span(tputs, '.2f')} |"
            )
    return lines


def _conditions(report: Report) -> list[str]:
    """Start-up and memory of the servers, and how and where the run was made."""
    rss = f"{report.gateway_rss_mib:.0f} MiB" if report.gateway_rss_mib else "n/a"
    lines = [
        "",
        f"Gateway: start to ready {report.gateway_ready_s:.2f} s, RSS after the runs {rss}.",
    ]
    if report.peer_ready_s is not None:
        prss = f"{report.peer_rss_mib:.0f} MiB" if report.peer_rss_mib else "n/a"
        lines.append(
            f"Peer (opensearch-mcp-server-py {report.peer_version}): start to ready "
            f"{report.peer_ready_s:.2f} s, RSS after the runs {prss}."
        )
    lines.append(
        f"{report.rounds} round(s) x {report.requests} requests per way and concurrency "
        f"({100 * report.dense_share:.0f}% kNN, the rest BM25; {LIMIT} results each). "
        f"Run {report.started} on {report.machine}; the load generator, the gateway, the peer "
        f"and the engine share the machine. Load average (1/5/15 min) {report.load_before} "
        f"before, {report.load_after} after."
    )
    return lines


def markdown(report: Report) -> str:
    """The table of each way, the paired ratios, and the run's conditions."""
    lines = _way_rows(report) + _latency_ratios(report) + _cpu_ratios(report)
    return "\n".join(lines + _conditions(report))


def chart(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    colours = {
        "direct": "#4C72B0",
        "gateway": "#55A868",
        "mcp": "#DD8452",
        "peer": "#C44E52",
        "es-direct": "#8172B2",
        "es-gateway": "#64B5CD",
    }
    Stats = tuple[float, float, float, int, int, float]
    panels: list[tuple[str, Callable[[Stats], float]]] = [
        ("p50 latency (ms)", lambda st: st[0]),
        ("p99 latency (ms)", lambda st: st[1]),
        ("throughput (req/s)", lambda st: st[2]),
    ]
    for ax, (title, pick) in zip(axes, panels, strict=True):
        ways = [w for w in report.ways]
        width = 0.8 / max(1, len(ways))
        for j, way in enumerate(ways):
            xs, ys = [], []
            for i, c in enumerate(report.concurrency):
                blocks = _blocks(report, way, c)
                if blocks:
                    xs.append(i + (j - (len(ways) - 1) / 2) * width)
                    ys.append(pick(_pooled(blocks)))
            bars = ax.bar(xs, ys, width * 0.95, label=way, color=colours.get(way))
            ax.bar_label(bars, fmt="%.1f" if "ms" in title else "%.0f", fontsize=7, padding=1)
        ax.set_xticks(
            range(len(report.concurrency)), [f"concurrency {c}" for c in report.concurrency]
        )
        if "ms" in title:
            ax.set_yscale("log")  # the peer is 10-20x slower: a linear axis hides the rest
        ax.set_title(title + (", log scale" if "ms" in title else ""), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        "Same queries against one OpenSearch node: direct client, A2M gateway, "
        "opensearch-mcp-server-py",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
