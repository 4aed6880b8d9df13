"""The quality benchmark's results: one cell per engine and mode, the markdown table for
docs/benchmarks.md (with the published reference figures beside it) and the chart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.quality.evaluate import MEASURES
from bench.quality.recall import EMBEDDED, LIMIT

# nDCG@10 on SciFact's train split measured with these exact files (its README).
TRAIN_REFERENCE = {"bm25": 0.698, "dense": 0.660, "hybrid": 0.721}
BEIR_BM25_TEST = 0.665


@dataclass
class Cell:
    """One engine x mode."""

    engine: str
    mode: str
    queries: int
    errors: int
    ndcg10: float
    recall100: float
    p50_ms: float
    empty: int
    version: str = ""
    analyzer: str = ""
    ndcg10_by_query: dict[str, float] = field(default_factory=dict)
    """Each query's nDCG@10, for paired comparisons (``python -m bench.quality.compare``)."""


@dataclass
class Report:
    corpus: str
    queries: str
    qrels: str
    documents: int
    evaluated_queries: int
    vectors: str
    tuning: dict[str, Any]
    machine: str
    load_before: str
    load_after: str
    started: str
    loads: dict[str, str] = field(default_factory=dict)
    cells: list[Cell] = field(default_factory=list)
    limit: int = LIMIT
    """Results asked per call (R@100 needs 100; tuning ``candidates`` needs an agent's 10)."""


def markdown(report: Report) -> str:
    """The results table, with the reference figures beside each mode."""
    ref_col = "train reference (README)"
    lines = [
        f"| engine | version | analyzer | mode | nDCG@10 | R@100 | {ref_col} nDCG@10 | queries "
        "| errors | p50 ms/call |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in report.cells:
        ref = TRAIN_REFERENCE.get(EMBEDDED.get(c.mode, c.mode))
        lines.append(
            f"| {c.engine} | {c.version or '-'} | {c.analyzer or '-'} | {c.mode} | "
            f"{c.ndcg10:.3f} | {c.recall100:.3f} | {f'{ref:.3f}' if ref is not None else '-'} | "
            f"{c.queries} | {c.errors} | {c.p50_ms:.1f} |"
        )
    t = report.tuning
    lines += [
        "",
        f"{report.documents} documents, {report.evaluated_queries} judged queries "
        f"(`{Path(report.queries).name}`, `{Path(report.qrels).name}`); "
        f"limit {report.limit}; text_fields {', '.join(t['text_fields'])}; "
        f"fusion {t.get('fusion') or 'default'}; rrf_k {t['rrf_k']}; "
        f"candidates {t['candidates'] or 'unset'}. "
        "BEIR paper, BM25 (Elasticsearch) on the *test* split: "
        f"{BEIR_BM25_TEST}.",
        f"Run {report.started} on {report.machine}; load average (1/5/15 min) "
        f"{report.load_before} before, {report.load_after} after.",
    ]
    return "\n".join(lines)


def chart(report: Report, path: Path) -> None:
    """Grouped bars: nDCG@10 and R@100 per engine and mode, reference nDCG@10 as ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = list(dict.fromkeys(c.engine for c in report.cells))
    modes = list(dict.fromkeys(c.mode for c in report.cells))
    by = {(c.engine, c.mode): c for c in report.cells}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    width = 0.8 / max(1, len(modes))
    colours = {"bm25": "#4C72B0", "dense": "#DD8452", "hybrid": "#55A868"}
    for ax, measure in zip(axes, MEASURES, strict=True):
        for j, mode in enumerate(modes):
            xs = [i + (j - (len(modes) - 1) / 2) * width for i in range(len(engines))]
            ys = [
                (by[(e, mode)].ndcg10 if measure == "nDCG@10" else by[(e, mode)].recall100)
                if (e, mode) in by
                else 0.0
                for e in engines
            ]
            bars = ax.bar(xs, ys, width * 0.95, label=mode, color=colours.get(mode))
            ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=1)
            if measure == "nDCG@10" and mode in TRAIN_REFERENCE:
                ax.axhline(TRAIN_REFERENCE[mode], color=colours.get(mode), lw=0.8, ls="--")
        ax.set_xticks(range(len(engines)), engines)
        ax.set_title(measure)
        ax.set_ylim(0, 1.12)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(
        loc="upper center",
        ncol=3,
        fontsize=8,
        title="mode (dashed lines: SciFact README's train figures)",
        title_fontsize=8,
    )
    fig.suptitle(
        f"A2M memory/recall through the gateway: {Path(report.queries).name}, "
        f"{report.evaluated_queries} queries, {report.documents} documents",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
