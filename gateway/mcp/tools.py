"""The three read-only tools, each one or two A2M calls on the store's own dispatcher.

Nothing here reads an engine: ``search`` is ``memory/recall``, ``timeline`` is
``memory/timeline``, ``fetch`` is ``memory/recall`` with ``where: {id}`` (then
``memory/fetch`` by key when no id matched and the store declares keys). So
the caller's scopes, rate limit, metrics, audit line and deadline are exactly
those of A2M. Any failure becomes an ``isError`` tool result naming the A2M
error, never a protocol error, a 5xx or a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types
from pydantic import ValidationError

from gateway.a2m.errors import A2MError, ErrorCode
from gateway.a2m.failures import to_a2m_error
from gateway.a2m.params import explain, limit_out_of_range
from gateway.config import McpConfig
from gateway.mcp import render
from gateway.mcp.schemas import TOOLS, FetchArgs, Source, Tool, input_schema
from gateway.observability.telemetry import active as active_tracing
from gateway.runtime import Gateway
from gateway.security.scopes import LOCAL, Caller
from gateway.store import sampling
from gateway.store.store import Store

log = logging.getLogger(__name__)

DESCRIPTIONS = {
    "search": "Search {what} and get ranked results, each with an id (pass it to fetch), a "
    "title, a snippet, a url when the record has one and a citation marker such as [1]. "
    "Cite results by their marker and url. Read-only.",
    "fetch": "Fetch one record of {what} in full by the id a search or timeline result gave "
    "(a record key also works). Read-only.",
    "timeline": "The newest records of {what} (optionally only those matching `where`), "
    "oldest first. Read-only.",
}
"""Each tool's description; a store's own description follows as "About it: ..."."""
ANNOTATIONS = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


@dataclass(frozen=True)
class Endpoint:
    """What one MCP URL serves: one store or federation, or all (`store` is then an argument)."""

    store: str | None = None

    @property
    def multi(self) -> bool:
        return self.store is None


class _ToolOutcome(Protocol):
    """What a tool call tells its span (observability.tracing.ToolSpan, or nothing untraced)."""

    def store(self, name: str) -> None: ...

    def failed(self, code: int | None) -> None: ...


class _Untraced:
    def store(self, name: str) -> None:
        return None

    def failed(self, code: int | None) -> None:
        return None


_UNTRACED = _Untraced()


class ToolError(Exception):
    """A tool call that cannot be served; its message goes to the model as an isError result."""


class InvalidArguments(ToolError):
    """Arguments outside the tool's input schema (INVALID_PARAMS on the call's span)."""


class McpTools:
    """Tool listing and tool calls over a gateway's stores."""

    def __init__(self, gateway: Gateway, config: McpConfig) -> None:
        self._gateway = gateway
        self._budget = render.Budget(
            max_chars=config.max_output_chars,
            snippet_chars=config.snippet_chars,
            text_format=config.text_format,
        )
        self._examples: dict[str, dict[str, Any]] = {}
        # Every store and federation, by the name a client passes as `store` (fixed at start).
        self._all = {n: Source.of_store(s) for n, s in gateway.stores.items()}
        self._all.update({n: Source.of_federation(f) for n, f in gateway.federations.items()})
        self._dispatchers = gateway.dispatchers

    def _sources(self, endpoint: Endpoint) -> list[Source]:
        sources = self._all
        return list(sources.values()) if endpoint.store is None else [sources[endpoint.store]]

    async def _learn_examples(self, store: Store) -> None:
        """First values of each exposed field, for the schema; unscoped stores only, once."""
        scope = store.config.scope
        # A store open to some callers only shows no values: another caller reads this schema.
        if store.name in self._examples or scope.enforced or scope.allow or not store.started:
            return
        examples: dict[str, Any] = {}
        try:
            records = await sampling.sample(store, 3)
        except Exception:  # an engine hiccup only costs the schema its examples
            log.info("store %s: no example values for the MCP schema", store.name)
            return
        for record in records:
            fields = {**(record.get("metadata") or {}), **record}
            for name, value in fields.items():
                if isinstance(value, str) and len(value) > 80:
                    continue  # content, not a filter value anyone would type
                if isinstance(value, str | int | float):
                    examples.setdefault(name, value)
        self._examples[store.name] = examples

    async def list_tools(self, endpoint: Endpoint, caller: Caller = LOCAL) -> list[types.Tool]:
        """The tools of `endpoint`; on the all-stores endpoint, over the stores `caller` may
        use (``scope.allow``): none when it may use none."""
        sources = self._sources(endpoint)
        if endpoint.store is None:
            sources = [s for s in sources if s.admits(caller)]
            if not sources:
                return []
        for store in dict.fromkeys(m for s in sources for m in s.members):
            await self._learn_examples(store)
        what = _what(sources, endpoint)
        first = sources[0]
        single = not endpoint.multi or len(sources) == 1
        about = (
            f" About it: {first.description.rstrip('.')}." if single and first.description else ""
        )
        return [
            types.Tool(
                name=tool.name,
                title=tool.title,
                description=DESCRIPTIONS[tool.name].format(what=what) + about,
                input_schema=input_schema(tool, sources, endpoint.multi, self._examples),
                output_schema=tool.output,
                annotations=ANNOTATIONS,
            )
            for tool in TOOLS.values()
        ]

    async def call(
        self, endpoint: Endpoint, name: str, arguments: Mapping[str, Any] | None, caller: Caller
    ) -> types.CallToolResult:
        """Run one tool for `caller`; every failure is an isError result."""
        tracing = active_tracing()
        if tracing is None:
            return await self._call(endpoint, name, arguments, caller, _UNTRACED)
        with tracing.tool(name) as span:
            return await self._call(endpoint, name, arguments, caller, span)

    async def _call(
        self,
        endpoint: Endpoint,
        name: str,
        arguments: Mapping[str, Any] | None,
        caller: Caller,
        span: _ToolOutcome,
    ) -> types.CallToolResult:
        tool = TOOLS.get(name)
        if tool is None:
            span.failed(None)
            return _error(f"Unknown tool {name[:64]!r}: this server offers {', '.join(TOOLS)}")
        try:
            args = tool.args.model_validate(dict(arguments or {}))
            source, qualified, args = self._resolve(endpoint, args)
            span.store(source.name)
            _check_limit(args, source)
            if isinstance(args, FetchArgs):
                rendered = await self._fetch(tool, source, qualified, args, caller)
            else:
                rendered = await self._read(tool, source, qualified, args, caller)
        except ValidationError as exc:
            span.failed(int(ErrorCode.INVALID_PARAMS))
            return _error(_describe_invalid(exc))
        except ToolError as exc:
            span.failed(
                int(ErrorCode.INVALID_PARAMS) if isinstance(exc, InvalidArguments) else None
            )
            return _error(str(exc))
        except Exception as exc:  # the tool boundary: logged with its traceback, never sent
            err = to_a2m_error(exc)
            span.failed(int(err.code))
            return _error(_describe_a2m(err))
        structured, text = rendered
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )

    def _resolve(self, endpoint: Endpoint, args: Any) -> tuple[Source, bool, Any]:
        """The store a call reads, whether ids are store-qualified, and the args to use."""
        stores = self._all
        if not endpoint.multi:
            if args.store is not None and args.store != endpoint.store:
                raise ToolError(
                    f"this endpoint serves the store {endpoint.store!r} only; "
                    "use /mcp for the others"
                )
            assert endpoint.store is not None
            return stores[endpoint.store], False, args
        name = args.store
        if isinstance(args, FetchArgs) and name is None:
            # A qualified id (`store:id`, as search gives on /mcp) names its store.
            prefix, sep, rest = args.id.partition(":")
            if sep and prefix in stores and rest:
                return stores[prefix], True, args.model_copy(update={"id": rest})
        if name is None:
            name = self._gateway.default_store
        if name not in stores:
            raise ToolError(f"No store named {name[:64]!r}; stores: {', '.join(stores)}")
        if isinstance(args, FetchArgs):
            prefix, sep, rest = args.id.partition(":")
            if sep and prefix == name and rest:
                args = args.model_copy(update={"id": rest})
        return stores[name], True, args

    async def _read(
        self, tool: Tool, store: Source, qualified: bool, args: Any, caller: Caller
    ) -> tuple[dict[str, Any], str]:
        """search and timeline: the tool's A2M method with the arguments it passes through."""
        params = {n: v for n in tool.passes if (v := getattr(args, n)) is not None}
        result = await self._dispatchers[store.name].dispatch(tool.method.name, params, caller)
        return render.rendered_listing(
            result["records"], store.name, qualified, self._budget, result.get("left_out")
        )

    async def _fetch(
        self, tool: Tool, store: Source, qualified: bool, args: FetchArgs, caller: Caller
    ) -> tuple[dict[str, Any], str]:
        dispatcher = self._dispatchers[store.name]
        result = await dispatcher.dispatch(
            tool.method.name, {"where": {"id": args.id}, "limit": 1}, caller
        )
        record = result["records"][0] if result["records"] else None
        if record is None and tool.by_key is not None and store.keys:
            found = await dispatcher.dispatch(tool.by_key.name, {"key": args.id}, caller)
            record = found["record"]
        if record is None:
            raise ToolError(
                f"No record with id or key {args.id[:200]!r} in the store {store.name!r} "
                "(or it is not visible to this caller)"
            )
        return render.rendered_document(record, store.name, qualified, self._budget)


def _what(sources: list[Source], endpoint: Endpoint) -> str:
    """What the tools read, for their descriptions: "the store 'demo' (...)"."""
    if endpoint.multi and len(sources) > 1:
        names = ", ".join(repr(s.name) for s in sources[:-1]) + f" and {sources[-1].name!r}"
        return f"the stores {names} (pick one with `store`; default {sources[0].name!r})"
    first = sources[0]
    kind = "federation" if first.federated else "store"
    what = f"the {kind} {first.name!r}"
    if first.federated:
        what += " (over " + ", ".join(repr(m.name) for m in first.members) + ")"
    return what


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _describe_invalid(exc: ValidationError) -> str:
    """Which arguments were wrong and how, never pydantic's text (it can echo the input)."""
    return f"Invalid arguments: {explain(exc)}. See the tool's input schema."


def _check_limit(args: Any, source: Source) -> None:
    """The input schema's bounds on `limit`: at least 1, at most the store's maximum.

    Raises:
        InvalidArguments: outside them (A2M's `limit: 0`, "all", is not offered to a model).
    """
    limit = getattr(args, "limit", None)
    if limit is not None and not 1 <= limit <= source.max_limit:
        raise InvalidArguments(
            f"Invalid arguments: {limit_out_of_range(1, source.max_limit)}. "
            "See the tool's input schema."
        )


def _describe_a2m(exc: A2MError) -> str:
    text = f"{exc.message} (A2M error {int(exc.code)})"
    if isinstance(exc.data, dict) and "retry_after_ms" in exc.data:
        text += f"; retry after {exc.data['retry_after_ms']} ms"
    return text
