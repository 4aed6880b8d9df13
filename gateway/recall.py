"""`a2m-gateway recall`: one question to a store, answered for a person (or as JSON).

A `where` key the store cannot test matches nothing, as A2M says (an agent's
framework may send keys a store lacks); a person gets a line on stderr naming
the key and the keys this store can test, so a typo is not silent.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from gateway.a2m.params import Scalar, WhereValue

if TYPE_CHECKING:
    from gateway.config import GatewayConfig
    from gateway.runtime import Gateway


def parse_where(pairs: list[str] | None) -> dict[str, WhereValue] | None:
    """`--where KEY=VALUE` options as a `where` object; a key given twice is any-of.

    A value that reads as a JSON number, true or false is that; anything else is a string.

    Raises:
        ValueError: an option without `=` or with an empty key.
    """
    import orjson

    if not pairs:
        return None
    where: dict[str, WhereValue] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--where {pair!r}: expected KEY=VALUE")
        value: Scalar = text
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, bool | int | float):
            value = parsed
        key = key.strip()
        if key in where:
            before = where[key]
            where[key] = [*(before if isinstance(before, list) else [before]), value]
        else:
            where[key] = value
    return where


def untestable(gateway: Gateway, store: str | None, where: dict[str, WhereValue] | None) -> None:
    """One stderr line per `where` key no served store can test (it matched nothing)."""
    if not where:
        return
    served = gateway.served_stores(store)
    testable = list(dict.fromkeys(k for s in served for k in s.mapper.where_keys()))
    name = store or gateway.default_store
    for key in where:
        if key not in testable:
            sys.stderr.write(
                f"a2m-gateway: where.{key} matched nothing: store {name} cannot test it "
                f"(keys it can test: {', '.join(testable) or 'none'})\n"
            )


async def recall(
    cfg: GatewayConfig,
    question: str,
    store: str | None,
    limit: int,
    as_json: bool,
    where: dict[str, WhereValue] | None = None,
) -> int:
    """Ask once and print the answer; the exit status (1: it failed, 2: refused params)."""
    import orjson

    from connectors.reach import why_unreachable
    from gateway.a2m.errors import A2MError, ErrorCode
    from gateway.observability.logs import quiet_engine_clients
    from gateway.runtime import Gateway

    quiet_engine_clients()
    gateway = Gateway(cfg)
    try:
        dispatcher = gateway.dispatcher(store)
        for served in gateway.served_stores(store):
            if served.config.scope.enforced:
                sys.stderr.write(
                    f"a2m-gateway: store {served.name} is scoped by caller claims; "
                    "a local recall has no caller, so it answers nothing\n"
                )
        try:
            params: dict[str, Any] = {"query": question, "limit": limit}
            if where:
                params["where"] = where
            result = await dispatcher.dispatch("memory/recall", params)
        except A2MError as err:  # the dispatcher maps every failure to an A2M error
            why = why_unreachable(err)
            sys.stderr.write(
                f"a2m-gateway: recall failed: {err.message} ({int(err.code)})"
                + (f": {why}\n" if why else "\n")
            )
            # A refused argument is a usage error (2), as argparse's own are.
            return 2 if err.code == ErrorCode.INVALID_PARAMS else 1
    finally:
        await gateway.close()
    untestable(gateway, store, where)
    if as_json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        sys.stdout.write(render_recall(question, result))
    return 0


def render_recall(question: str, result: dict[str, Any], width: int = 300) -> str:
    """A recall result for a person: rank, score, title and citation, then a snippet."""
    records = result.get("records") or []
    if not records:
        return f"No record answers {question!r}.\n"
    lines: list[str] = []
    for rank, rec in enumerate(records, start=1):
        score = rec.get("score")
        title = (rec.get("metadata") or {}).get("title") or rec.get("key") or ""
        cite = rec.get("uri") or rec.get("key") or rec.get("id") or ""
        head = f"{rank}. " + (f"[{score:.2f}] " if isinstance(score, int | float) else "")
        lines.append(f"{head}{title}".rstrip())
        if cite:
            lines.append(f"   {cite}")
        content = str(rec.get("content") or "")
        first, _, rest = content.partition("\n")
        if first.strip() and str(title).endswith(first.strip()):
            content = rest  # a heading already shown in the title
        text = " ".join(content.split())
        if text:
            lines.append("   " + (text if len(text) <= width else text[: width - 1] + "…"))
        lines.append("")
    return "\n".join(lines)
