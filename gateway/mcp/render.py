"""A2M records -> tool results: titles, snippets, citation markers, within a character budget.

The budget (``server.mcp.max_output_chars``) bounds the larger of the text
block and the JSON of ``structuredContent``. A listing over budget loses its
lowest-ranked results first (``truncated: true``, ``omitted: n``, and a line
saying so); a single result or a fetched document too long on its own has its
text cut, marked with an ellipsis and ``truncated: true``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

TITLE_CHARS = 120
TITLE_SCAN_CHARS = 4096
"""How much of a document is split into lines first, looking for its title."""
ELLIPSIS = "…"


@dataclass(frozen=True)
class Budget:
    max_chars: int
    snippet_chars: int
    text_format: Literal["compact", "json"]


def public_id(store: str, record_id: str, qualified: bool) -> str:
    """The id a client passes back to fetch: `store:id` on the all-stores endpoint."""
    return f"{store}:{record_id}" if qualified else record_id


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, stripped: ``str.split`` splits on exactly what the
    regex ``\\s+`` matches, at about an eighth of its CPU (it ran for every result).

    Every whitespace character but the ASCII space is a Unicode separator or control
    character, which ``isprintable`` refuses; so in printable text without a double space
    the only whitespace is single spaces, and stripping the ends collapses it, at about
    half the split and join's CPU.
    """
    if "  " not in text and _printable(text):
        return text.strip(" ")
    return " ".join(text.split())


_CONTROL = bytes(range(32)) + b"\x7f"
"""The ASCII characters ``str.isprintable`` refuses."""


def _printable(text: str) -> bool:
    """``text.isprintable()``; for ASCII text, by deleting control bytes at half its CPU."""
    if text.isascii():
        raw = text.encode("ascii")
        return len(raw.translate(None, _CONTROL)) == len(raw)
    return text.isprintable()


def title_of(record: dict[str, Any]) -> str:
    metadata = record.get("metadata") or {}
    title = metadata.get("title") if isinstance(metadata, dict) else None
    if isinstance(title, str) and title.strip():
        return _cut(_collapse(title), TITLE_CHARS)
    line = _first_line(record.get("content") or "")
    if line is not None:
        return _cut(line.strip().lstrip("#").strip(), TITLE_CHARS)
    return record.get("key") or str(record["id"])


def _first_line(content: str) -> str | None:
    """The first line that is not blank; the document's head is read first (titles are
    near the top, and splitting a whole long document per result costs its length)."""
    head = content[:TITLE_SCAN_CHARS]
    lines = head.splitlines()
    cut = len(head) < len(content)
    for line in lines[:-1] if cut else lines:  # a cut head's last line may go on
        if line.strip():
            return line
    if cut:
        for line in content.splitlines():
            if line.strip():
                return line
    return None


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(n - 1, 0)].rstrip() + ELLIPSIS


def _snippet(content: str, n: int) -> str:
    # Only the head is read: collapsing the whitespace of a whole long document per result
    # was most of a search's own CPU. Collapsing a prefix gives a prefix of the longer
    # head's collapse, so when the short head already runs past n the cut is the same.
    short = _collapse(content[: n + 64])
    if len(short) > n:
        return _cut(short, n)
    head = content[: 2 * n + 64]
    text = _cut(_collapse(head), n)
    if len(head) < len(content) and not text.endswith(ELLIPSIS):
        text = text[: n - 1].rstrip() + ELLIPSIS  # cut inside a run of whitespace
    return text


def _result(record: dict[str, Any], store: str, n: int, qualified: bool, budget: Budget) -> Any:
    out: dict[str, Any] = {
        "id": public_id(store, str(record["id"]), qualified),
        "cite": f"[{n}]",
        "title": title_of(record),
        "snippet": _snippet(record.get("content") or "", budget.snippet_chars),
        "store": store,
    }
    for src, dst in (("uri", "url"), ("key", "key"), ("score", "score")):
        if record.get(src) is not None:
            out[dst] = record[src]
    if record.get("created_at") is not None:
        out["created_at"] = record["created_at"]
    metadata = record.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("passage"), dict):
        out["passage"] = metadata["passage"]  # where the snippet sits (search.passages)
    if isinstance(metadata, dict) and isinstance(metadata.get("chunks"), list):
        # The records of one group folded into this one (search.per_group): fetchable ids.
        out["chunks"] = [
            {"id": public_id(store, str(c["id"]), qualified), "range": c["range"]}
            for c in metadata["chunks"]
            if isinstance(c, dict) and "id" in c and "range" in c
        ]
    return out


def _listing_text(listing: dict[str, Any]) -> str:
    lines: list[str] = []
    for r in listing["results"]:
        head = f"{r['cite']} {r['title']} (id {r['id']}"
        if "score" in r:
            head += f", score {r['score']:.3f}"
        if "created_at" in r:
            head += f", {r['created_at']}"
        lines.append(head + ")")
        if "url" in r:
            lines.append(f"    {r['url']}")
        if r["snippet"]:
            lines.append(f"    {r['snippet']}")
        if "passage" in r:
            at = ", ".join(f"{a}-{b}" for a, b in r["passage"]["offsets"])
            where = r["passage"].get("uri", "")
            lines.append(f"    (passage at characters {at} of {r['passage']['length']}) {where}")
        if "chunks" in r:
            held = ", ".join(
                f"id {c['id']} at {c['range'][0]}-{c['range'][1]}" for c in r["chunks"]
            )
            lines.append(f"    (one document's records together: {held})")
    if not listing["results"]:
        lines.append("No matching records.")
    if listing["omitted"]:
        lines.append(
            f"({listing['omitted']} more results omitted to fit the output budget: "
            "lower `limit`, narrow `where`, or fetch a result by id.)"
        )
    if listing.get("left_out"):
        missing = ", ".join(f"{m['member']} ({m['reason']})" for m in listing["left_out"])
        lines.append(f"(Federation members left out of this answer: {missing}.)")
    return "\n".join(lines)


def _document_text(doc: dict[str, Any]) -> str:
    head = f"{doc['cite']} {doc['title']} (id {doc['id']}, store {doc['store']})"
    if "url" in doc:
        head += f"\n{doc['url']}"
    tail = "\n(text truncated to fit the output budget)" if doc["truncated"] else ""
    return f"{head}\n\n{doc['text']}{tail}"


def text_of(structured: dict[str, Any], budget: Budget) -> str:
    if budget.text_format == "json":
        return orjson.dumps(structured).decode()
    return _document_text(structured) if "text" in structured else _listing_text(structured)


def _measure(structured: dict[str, Any], budget: Budget) -> tuple[int, str]:
    """The text block, and the larger of its length and that of structuredContent's JSON."""
    raw = orjson.dumps(structured)
    if budget.text_format == "json":
        as_json = raw.decode()
        return len(as_json), as_json  # the text block is that JSON
    text = text_of(structured, budget)
    # UTF-8 is at least one byte a character: within the budget in bytes is within it in
    # characters, and only a longer one needs decoding to be counted.
    json_chars = len(raw) if len(raw) <= budget.max_chars else len(raw.decode())
    return max(json_chars, len(text)), text


def listing(
    records: list[dict[str, Any]],
    store: str,
    qualified: bool,
    budget: Budget,
    left_out: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The structured result of search / timeline, trimmed to the budget.

    left_out: a federation's members that did not answer (its A2M result's `left_out`).
    """
    return rendered_listing(records, store, qualified, budget, left_out)[0]


def rendered_listing(
    records: list[dict[str, Any]],
    store: str,
    qualified: bool,
    budget: Budget,
    left_out: list[dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], str]:
    """:func:`listing` and its text block (measuring the listing made the text already)."""
    results = [_result(r, store, i + 1, qualified, budget) for i, r in enumerate(records)]
    out: dict[str, Any] = {"results": results, "truncated": False, "omitted": 0}
    if left_out:
        out["left_out"] = [{"member": m["member"], "reason": m["reason"]} for m in left_out]
    size, text = _measure(out, budget)
    while size > budget.max_chars and len(results) > 1:
        results.pop()
        out["omitted"] += 1
        out["truncated"] = True
        size, text = _measure(out, budget)
    if results and size > budget.max_chars:
        # One result alone is too long: cut its snippet to what is left.
        excess = size - budget.max_chars
        results[0]["snippet"] = _cut(
            results[0]["snippet"], max(len(results[0]["snippet"]) - excess, 0)
        )
        out["truncated"] = True
        text = text_of(out, budget)
    return out, text


def document(record: dict[str, Any], store: str, qualified: bool, budget: Budget) -> dict[str, Any]:
    """The structured result of fetch: the record's full text, cut only past the budget."""
    return rendered_document(record, store, qualified, budget)[0]


def rendered_document(
    record: dict[str, Any], store: str, qualified: bool, budget: Budget
) -> tuple[dict[str, Any], str]:
    """:func:`document` and its text block."""
    out: dict[str, Any] = {
        "id": public_id(store, str(record["id"]), qualified),
        "cite": "[1]",
        "title": title_of(record),
        "text": record.get("content") or "",
        "store": store,
        "metadata": dict(record.get("metadata") or {}),
        "truncated": False,
    }
    if record.get("uri") is not None:
        out["url"] = record["uri"]
    if record.get("key") is not None:
        out["key"] = record["key"]
    for name in ("group", "role", "owner", "media_type", "created_at", "updated_at"):
        if record.get(name) is not None:
            out["metadata"][name] = record[name]
    size, text = _measure(out, budget)
    if size > budget.max_chars:
        out["truncated"] = True
        # The JSON form escapes some characters, so cut once more if the first cut fell short.
        for _ in range(3):
            size, text = _measure(out, budget)
            excess = size - budget.max_chars
            if excess <= 0:
                break
            out["text"] = _cut(out["text"], max(len(out["text"]) - excess - 1, 0))
        else:
            text = text_of(out, budget)
    return out, text
