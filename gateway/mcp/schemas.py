"""Tool arguments (pydantic) and the JSON Schemas clients see, built from each store's mapping.

Each tool is a :class:`Tool` over an entry of the A2M method registry
(gateway.a2m.methods): the method a call runs, and the params it passes
through, which must be params of that method's model (checked when the table
is built, so a renamed param cannot leave a tool sending what A2M ignores).
The input schema of ``search`` and ``timeline`` lists the ``where`` fields the
store's mapping exposes (the only ones A2M filters on), with example values
when they were cheap to learn (an unscoped store's first records: a scoped
store's values could name another tenant's data, so it gets none). A
federation is one MCP store too (a ``Source`` over its members): its fields
are those any member exposes, its limits the tightest member's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway.a2m.methods import METHODS, Method
from gateway.a2m.params import WhereValue
from gateway.federation.federation import Federation
from gateway.front.profile import Limits
from gateway.security.scopes import Caller
from gateway.store.store import Store

_SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean"]}
_WHERE_VALUE: dict[str, Any] = {
    "anyOf": [_SCALAR, {"type": "array", "items": _SCALAR, "minItems": 1}]
}


class _Args(BaseModel):
    # Strict JSON types as on A2M; an unknown argument is a mistake worth telling the model.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SearchArgs(_Args):
    query: str = Field(min_length=1)
    # Checked against the declared schema's bounds, 1 to the store's maximum, once the store
    # is known (gateway.mcp.tools): A2M's `limit: 0` ("all") is not offered to a model.
    limit: int | None = None
    where: dict[str, WhereValue] | None = None
    key_prefix: str | None = None
    store: str | None = None


class FetchArgs(_Args):
    id: str = Field(min_length=1)
    store: str | None = None


class TimelineArgs(_Args):
    limit: int | None = None  # bounds as for SearchArgs
    where: dict[str, WhereValue] | None = None
    key_prefix: str | None = None
    store: str | None = None


def where_fields(store: Store) -> list[str]:
    """Record fields and metadata keys a `where` equality can test on this store."""
    return store.mapper.where_keys()


@dataclass(frozen=True)
class Source:
    """What one MCP store name reads: a store, or a federation over its member stores."""

    name: str
    description: str | None
    members: tuple[Store, ...]
    """The store itself, or the federation's members (their mappings make the schema)."""
    limits: Limits
    """The limits its front applies (a federation's: the tightest member's)."""
    federated: bool = False

    @classmethod
    def of_store(cls, store: Store) -> Source:
        return cls(store.name, store.config.description, (store,), store.limits)

    @classmethod
    def of_federation(cls, federation: Federation) -> Source:
        members = tuple(m.store for m in federation.members)
        return cls(
            federation.name,
            federation.config.description,
            members,
            federation.limits,
            federated=True,
        )

    def admits(self, caller: Caller) -> bool:
        """Whether `caller` may use it (a federation: any of its members; ``scope.allow``)."""
        return any(m.admits(caller) for m in self.members)

    @property
    def max_limit(self) -> int:
        return self.limits.max_recall_limit

    def default_limit(self, tool: str) -> int:
        lim = self.limits
        return lim.default_recall_limit if tool == "search" else lim.default_timeline_limit

    @property
    def max_query_length(self) -> int:
        return self.limits.max_query_length

    @property
    def keys(self) -> bool:
        """Records have keys (key_prefix, fetch by key): a federation only if every member's do."""
        return all(s.config.mapping.key for s in self.members)

    def fields(self) -> dict[str, list[str]]:
        """Each `where` field, with the members exposing it (a federation's: any member's)."""
        found: dict[str, list[str]] = {}
        for store in self.members:
            for name in where_fields(store):
                found.setdefault(name, []).append(store.name)
        return found


def _where_schema(
    sources: Sequence[Source], examples: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    props: dict[str, Any] = {}
    where: dict[str, list[str]] = {}
    for source in sources:
        for name, members in source.fields().items():
            prop = props.setdefault(name, dict(_WHERE_VALUE))
            # Stores on the all-stores endpoint; members on one federation's endpoint.
            where.setdefault(name, []).extend(
                members if len(sources) == 1 and source.federated else [source.name]
            )
            for member in members:
                example = examples.get(member, {}).get(name)
                if example is not None and example not in prop.setdefault("examples", []):
                    prop["examples"].append(example)
    many = len(sources) > 1 or any(s.federated and len(s.members) > 1 for s in sources)
    for name, prop in props.items():
        if not prop.get("examples"):
            prop.pop("examples", None)
        prop["description"] = "equals this value (a list: any of them)" + (
            f"; in stores {', '.join(dict.fromkeys(where[name]))}" if many else ""
        )
    testable = ", ".join(props) or "none"
    return {
        "type": "object",
        "description": "Equality filters on record fields and metadata keys, ANDed. "
        f"The keys {'these stores' if many else 'this store'} can test: {testable}; "
        "any other key matches nothing.",
        "properties": props,
        "additionalProperties": _WHERE_VALUE,
    }


def _store_schema(sources: Sequence[Source]) -> dict[str, Any]:
    return {
        "type": "string",
        "enum": [s.name for s in sources],
        "description": "the store to read (default: " + sources[0].name + ")",
    }


def _property(
    name: str,
    tool: str,
    sources: Sequence[Source],
    examples: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any] | None:
    """The schema of one argument over `sources`; None: not offered there."""
    if name == "query":
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": max(s.max_query_length for s in sources),
            "description": "what to look for, in natural language or keywords",
        }
    if name == "id":
        return {
            "type": "string",
            "minLength": 1,
            "description": "the `id` of a search or timeline result (a record key also works)",
        }
    if name == "limit":
        return {
            "type": "integer",
            "minimum": 1,
            "maximum": max(s.max_limit for s in sources),
            "default": sources[0].default_limit(tool),
            "description": "how many records at most",
        }
    if name == "where":
        return _where_schema(sources, examples)
    if name == "key_prefix":
        if not any(s.keys for s in sources):
            return None
        return {"type": "string", "description": "only records whose key starts with this"}
    raise AssertionError(f"no schema for the argument {name!r}")


def input_schema(
    tool: Tool, sources: Sequence[Source], multi: bool, examples: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The inputSchema of `tool` over `sources` (`multi`: the all-stores endpoint, with `store`)."""
    props: dict[str, Any] = {}
    for name in tool.args.model_fields:
        if name == "store":
            continue
        prop = _property(name, tool.name, sources, examples)
        if prop is not None:
            props[name] = prop
    if multi:
        props["store"] = _store_schema(sources)
    return {
        "type": "object",
        "properties": props,
        # Those the arguments model has no default for (query, fetch's id).
        "required": [n for n, f in tool.args.model_fields.items() if f.is_required()],
        "additionalProperties": False,
    }


_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "pass to fetch"},
        "cite": {"type": "string", "description": "citation marker, e.g. [1]"},
        "title": {"type": "string"},
        "snippet": {"type": "string"},
        "url": {"type": "string", "description": "the record's uri, for citation"},
        "key": {"type": "string"},
        "score": {"type": "number"},
        "store": {"type": "string"},
        "created_at": {"type": "string"},
        "chunks": {
            "type": "array",
            "description": "the records of one document whose texts the snippet holds "
            "(search.per_group): each id (pass to fetch) and its [start, end) characters",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "range": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["id", "range"],
            },
        },
        "passage": {
            "type": "object",
            "description": "where the snippet's passages sit in the document fetch returns: "
            "offsets ([start, end) characters), length, best (the index in offsets of the "
            "passage ranked first), uri (a text fragment link)",
        },
    },
    "required": ["id", "cite", "title", "snippet", "store"],
}

_LISTING: dict[str, Any] = {
    "type": "object",
    "properties": {
        "results": {"type": "array", "items": _RESULT},
        "truncated": {
            "type": "boolean",
            "description": "true when results were dropped or cut to fit the output budget",
        },
        "omitted": {"type": "integer", "minimum": 0, "description": "results dropped"},
        "left_out": {
            "type": "array",
            "description": "federation members that did not answer (absent when all did)",
            "items": {
                "type": "object",
                "properties": {"member": {"type": "string"}, "reason": {"type": "string"}},
                "required": ["member", "reason"],
            },
        },
    },
    "required": ["results", "truncated", "omitted"],
}

_DOCUMENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "cite": {"type": "string"},
        "title": {"type": "string"},
        "text": {"type": "string", "description": "the record's full content"},
        "url": {"type": "string"},
        "key": {"type": "string"},
        "store": {"type": "string"},
        "metadata": {"type": "object"},
        "truncated": {"type": "boolean", "description": "true when text was cut to the budget"},
    },
    "required": ["id", "cite", "title", "text", "store", "metadata", "truncated"],
}


@dataclass(frozen=True)
class Tool:
    """One tool: its arguments, the A2M method a call runs, and its output schema."""

    name: str
    title: str
    args: type[_Args]
    method: Method
    output: dict[str, Any]
    own: frozenset[str] = frozenset()
    """Arguments that are the tool's own, not params of `method` (fetch's `id`)."""
    by_key: Method | None = None
    """A second call when the first found nothing (fetch: by key, on stores with keys)."""
    passes: tuple[str, ...] = ()
    """The arguments sent to `method` as its params of the same name (derived)."""

    def __post_init__(self) -> None:
        assert self.method.params is not None, self.method.name
        params = self.method.params.model_fields
        names = [n for n in self.args.model_fields if n != "store"]
        stray = set(names) - set(params) - self.own
        if stray:
            raise TypeError(f"tool {self.name}: {sorted(stray)} are not {self.method.name} params")
        object.__setattr__(self, "passes", tuple(n for n in names if n not in self.own))


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("search", "Search", SearchArgs, METHODS["memory/recall"], _LISTING),
        Tool(
            "fetch",
            "Fetch record",
            FetchArgs,
            METHODS["memory/recall"],
            _DOCUMENT,
            own=frozenset({"id"}),
            by_key=METHODS["memory/fetch"],
        ),
        Tool("timeline", "Newest records", TimelineArgs, METHODS["memory/timeline"], _LISTING),
    )
}
"""Every tool, in the order tools/list gives them."""

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {n: t.output for n, t in TOOLS.items()}
