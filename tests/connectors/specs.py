"""Connector specs for connector tests, from the same nested sections a store config has.

Connector tests build the connector's own spec: no gateway type is involved.
"""

from __future__ import annotations

import string
from typing import Any

from connectors.lucene.spec import AwsSigV4, LuceneConnectionSpec
from connectors.qdrant.spec import QdrantConnectionSpec
from connectors.spec import ConnectionSpec, ConnectorSpec, FieldsSpec, SearchSpec, Secret

_SECRETS = ("cloud_id", "api_key", "password", "bearer_token", "access_token")
_READ = (
    "content",
    "uri",
    "media_type",
    "key",
    "group",
    "role",
    "owner",
    "created_at",
    "updated_at",
)
_SEARCH = {f for f in SearchSpec.__dataclass_fields__}
_CONNECTION: dict[str, type[ConnectionSpec]] = {
    "elasticsearch": LuceneConnectionSpec,
    "opensearch": LuceneConnectionSpec,
    "qdrant": QdrantConnectionSpec,
}
"""Each engine's own connection spec."""


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with each override section merged into it (a non-dict value replaces)."""
    data = dict(base)
    for section, value in over.items():
        if isinstance(value, dict) and isinstance(data.get(section), dict):
            data[section] = {**data[section], **value}
        else:
            data[section] = value
    return data


def _template_fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def spec_of(data: dict[str, Any]) -> ConnectorSpec[Any]:
    """The spec for a store described by nested ``connection``/``mapping``/``search``/``scope``."""
    conn = dict(data.get("connection") or {})
    for key in _SECRETS:
        if conn.get(key) is not None:
            conn[key] = Secret(conn[key])
    if "hosts" in conn:
        conn["hosts"] = tuple(conn["hosts"])
    if conn.get("aws_sigv4") is not None:
        conn["aws_sigv4"] = AwsSigV4(**conn["aws_sigv4"])
    m = dict(data.get("mapping") or {})
    read = [m[k] for k in _READ if m.get(k)]
    if m.get("id", "_id") != "_id":
        read.append(m["id"])
    if m.get("content_template"):
        read.extend(_template_fields(m["content_template"]))
    read.extend(m.get("metadata", []))
    fields = FieldsSpec(
        id=m.get("id", "_id"),
        read=tuple(dict.fromkeys(read)),
        content=m.get("content"),
        created_at=m.get("created_at"),
        group=m.get("group"),
        key=m.get("key"),
        owner=m.get("owner"),
        scope=tuple(rule["field"] for rule in (data.get("scope") or {}).get("filters", [])),
    )
    search = {k: v for k, v in (data.get("search") or {}).items() if k in _SEARCH}
    if "text_fields" in search:
        search["text_fields"] = tuple(search["text_fields"])
    return ConnectorSpec(
        backend=data["backend"],
        index=data["index"],
        connection=_CONNECTION[data["backend"]](**conn),
        fields=fields,
        search=SearchSpec(**search),
    )
