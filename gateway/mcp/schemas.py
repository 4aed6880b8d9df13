"""Tool arguments (pydantic) and the JSON Schemas clients see, built from each store's mapping.

The input schema of ``search`` and ``timeline`` lists the ``where`` fields the
store's mapping exposes (the only ones A2M filters on), with example values
when they were cheap to learn (an unscoped store's first records: a scoped
store's values could name another tenant's data, so it gets none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway.mapping import FILTERABLE_FIELDS
from gateway.params import WhereValue
from gateway.store import Store

_SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean"]}
_WHERE_VALUE: dict[str, Any] = {
    "anyOf": [_SCALAR, {"type": "array", "items": _SCALAR, "minItems": 1}]
}


class _Args(BaseModel):
    # Strict JSON types as on A2M; an unknown argument is a mistake worth telling the model.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SearchArgs(_Args):
    query: str = Field(min_length=1)
    # The declared schema's minimum: A2M's `limit: 0` ("all") is not offered to a model.
    limit: int | None = Field(default=None, ge=1)
    where: dict[str, WhereValue] | None = None
    key_prefix: str | None = None
    store: str | None = None


class FetchArgs(_Args):
    id: str = Field(min_length=1)
    store: str | None = None


class TimelineArgs(_Args):
    limit: int | None = Field(default=None, ge=1)
    where: dict[str, WhereValue] | None = None
    key_prefix: str | None = None
    store: str | None = None


ARGS: dict[str, type[_Args]] = {"search": SearchArgs, "fetch": FetchArgs, "timeline": TimelineArgs}


def where_fields(store: Store) -> list[str]:
    """Record fields and metadata keys a `where` equality can test on this store."""
    mapper = store.mapper
    names = [n for n in FILTERABLE_FIELDS if mapper.engine_field(n) is not None]
    names += [n for n in store.config.mapping.metadata if n not in names]
    return names


def _where_schema(
    stores: Sequence[Store], examples: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for store in stores:
        for name in where_fields(store):
            prop = props.setdefault(name, {**_WHERE_VALUE, "x-stores": []})
            prop["x-stores"].append(store.name)
            example = examples.get(store.name, {}).get(name)
            if example is not None:
                prop.setdefault("examples", []).append(example)
    for prop in props.values():
        names = prop.pop("x-stores")
        prop["description"] = "equals this value (a list: any of them)" + (
            f"; in stores {', '.join(names)}" if len(stores) > 1 else ""
        )
    return {
        "type": "object",
        "description": "Equality filters on record fields and metadata keys, ANDed. "
        "A field the store does not expose matches nothing.",
        "properties": props,
        "additionalProperties": _WHERE_VALUE,
    }


def _store_schema(stores: Sequence[Store]) -> dict[str, Any]:
    return {
        "type": "string",
        "enum": [s.name for s in stores],
        "description": "the store to read (default: " + stores[0].name + ")",
    }


def input_schema(
    tool: str, stores: Sequence[Store], multi: bool, examples: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The inputSchema of `tool` over `stores` (`multi`: the all-stores endpoint, with `store`)."""
    top = max(s.config.limits.max_recall_limit for s in stores)
    props: dict[str, Any] = {}
    required: list[str] = []
    if tool == "search":
        props["query"] = {
            "type": "string",
            "minLength": 1,
            "maxLength": max(s.config.limits.max_query_length for s in stores),
            "description": "what to look for, in natural language or keywords",
        }
        required.append("query")
    if tool == "fetch":
        props["id"] = {
            "type": "string",
            "minLength": 1,
            "description": "the `id` of a search or timeline result (a record key also works)",
        }
        required.append("id")
    else:
        default = stores[0].config.limits
        props["limit"] = {
            "type": "integer",
            "minimum": 1,
            "maximum": top,
            "default": default.default_recall_limit
            if tool == "search"
            else default.default_timeline_limit,
            "description": "how many records at most",
        }
        props["where"] = _where_schema(stores, examples)
        if any(s.config.mapping.key for s in stores):
            props["key_prefix"] = {
                "type": "string",
                "description": "only records whose key starts with this",
            }
    if multi:
        props["store"] = _store_schema(stores)
    return {
        "type": "object",
        "properties": props,
        "required": required,
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

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "search": _LISTING,
    "timeline": _LISTING,
    "fetch": _DOCUMENT,
}
