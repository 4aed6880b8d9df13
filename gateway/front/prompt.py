"""Rendered prompt text alongside recalled records (canonical A2M §4.16).

Offered: method `template` (the default) and `none` (no `prompt` field);
styles `auto`, `facts` and `transcript`; a `budget` in characters; `cite`.
Rendering never changes which records are returned or their order: it reads
the final record list and selects whole records that fit the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.a2m.errors import InvalidParams
from gateway.a2m.params import PromptOptions
from gateway.a2m.records import Record

STYLES = ("auto", "facts", "transcript")
METHODS = ("template", "none")

_OLDEST = datetime.min.replace(tzinfo=UTC)

CONVERSATION_ROLES = frozenset({"user", "assistant", "system", "tool"})
"""Roles that make a record a turn of a conversation (canonical §3.1)."""


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    text: str
    ids: list[str]


def check_options(options: PromptOptions, max_budget: int) -> None:
    """Refuse what is not offered rather than substitute (§4.16).

    Raises:
        InvalidParams: an unknown method, style or model, or a budget above the limit.
    """
    if options.method not in METHODS:
        raise InvalidParams(
            f"prompt.method {options.method[:64]!r} is not offered (offered: {', '.join(METHODS)})"
        )
    if options.model is not None:
        raise InvalidParams("prompt.model is not offered: this server renders by template only")
    if options.style not in STYLES:
        raise InvalidParams(
            f"prompt.style {options.style[:64]!r} is not offered (offered: {', '.join(STYLES)})"
        )
    if options.budget is not None and options.budget > max_budget:
        raise InvalidParams(f"prompt.budget exceeds this store's limit of {max_budget} characters")


def wanted(options: PromptOptions | None) -> bool:
    """Whether the result carries `prompt` and `prompt_ids` (method `none` renders nothing)."""
    return options is not None and options.method != "none"


def resolve_style(style: str, records: list[Record]) -> str:
    """`auto`: a transcript where every record is a turn of a conversation, facts otherwise."""
    if style != "auto":
        return style
    if records and all((r.role or "").lower() in CONVERSATION_ROLES for r in records):
        return "transcript"
    return "facts"


def _source(record: Record) -> str | None:
    return record.uri or record.key


def _entry(style: str, record: Record, cite: bool) -> str:
    text = " ".join((record.content or "").split())
    line = f"{record.role or 'memory'}: {text}" if style == "transcript" else f"- {text}"
    source = _source(record) if cite else None
    return f"{line} [{source}]" if source else line


def render(
    records: list[Record], options: PromptOptions, *, prefer_newest: bool = False
) -> RenderedPrompt:
    """Render the records; a budget (characters) keeps whole records only.

    Records are kept in rank order (recall), or newest first when `prefer_newest`
    (timeline: the latest turns matter most); the text then reads in the records'
    order, a transcript in creation order.
    """
    style = resolve_style(options.style, records)
    entries = {id(r): _entry(style, r, options.cite) for r in records}
    order = list(reversed(records)) if prefer_newest else records
    chosen: set[int] = set()
    used = 0
    for record in order:
        cost = len(entries[id(record)]) + (1 if chosen else 0)  # the joining newline
        if options.budget is not None and used + cost > options.budget:
            break
        chosen.add(id(record))
        used += cost
    kept = [r for r in records if id(r) in chosen]
    if style == "transcript":
        kept.sort(key=lambda r: (r.created_at or _OLDEST, r.id))
    return RenderedPrompt(text="\n".join(entries[id(r)] for r in kept), ids=[r.id for r in kept])
