"""Rendered prompt text alongside recalled records (§4.16), template method only.

Rendering never changes which records are returned or their order: it reads
the final record list and selects, in rank order, the whole records that fit
the budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import InvalidParams
from gateway.params import PromptOptions
from gateway.records import Record

STYLES = ("list", "cited", "transcript")
METHODS = ("template",)
TOKENIZER = "chars/4"
"""Token estimate named in describe: ceil(len(text) / 4), a common rule of thumb."""


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    text: str
    ids: list[str]


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def check_options(options: PromptOptions, max_budget: int) -> None:
    """Refuse what is not offered rather than substitute (§4.16).

    Raises:
        InvalidParams: an unknown method, style or model, or a budget above the limit.
    """
    if options.method not in METHODS:
        raise InvalidParams(
            f"prompt.method {options.method!r} is not offered (offered: {', '.join(METHODS)})"
        )
    if options.model is not None:
        raise InvalidParams("prompt.model is not offered: this server renders by template only")
    if options.style not in STYLES:
        raise InvalidParams(
            f"prompt.style {options.style!r} is not offered (offered: {', '.join(STYLES)})"
        )
    if options.budget is not None and options.budget > max_budget:
        raise InvalidParams(f"prompt.budget exceeds this store's limit of {max_budget}")


def _entry(style: str, record: Record, number: int) -> str:
    text = " ".join((record.content or "").split())
    if style == "cited":
        line = f"[{number}] {text}"
        if record.uri:
            line += f"\n    source: {record.uri}"
        return line
    if style == "transcript":
        return f"{record.role or 'document'}: {text}"
    return f"- {text}"


def render(records: list[Record], options: PromptOptions) -> RenderedPrompt:
    """Render in the requested style; a budget drops whole records from the tail of the ranking."""
    style = options.style
    chosen: list[Record] = []
    used = 0
    for record in records:
        cost = estimate_tokens(_entry(style, record, len(chosen) + 1)) + 1
        if options.budget is not None and used + cost > options.budget:
            break
        chosen.append(record)
        used += cost
    if style == "transcript":
        # A transcript reads in creation order; records without a date keep rank order, last.
        dated = [r for r in chosen if r.created_at is not None]
        undated = [r for r in chosen if r.created_at is None]
        dated.sort(key=lambda r: (r.created_at, r.id))
        chosen = dated + undated
    lines = [_entry(style, r, i) for i, r in enumerate(chosen, start=1)]
    return RenderedPrompt(text="\n".join(lines), ids=[r.id for r in chosen])
