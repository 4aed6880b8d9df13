"""Index-mapping introspection and the security checks a store's fields must pass at open()."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connectors.base import ID_FIELD
from connectors.errors import EngineConfigError
from connectors.lucene.query import parse_text_fields

if TYPE_CHECKING:
    from connectors.lucene.spec import LuceneSpec

# Field types a sort or filter can use directly (doc values, exact terms).
_EXACT_TYPES = frozenset(
    {
        "keyword",
        "constant_keyword",
        "wildcard",
        "long",
        "integer",
        "short",
        "byte",
        "double",
        "float",
        "half_float",
        "scaled_float",
        "unsigned_long",
        "date",
        "date_nanos",
        "boolean",
        "ip",
    }
)
_SORTABLE_TIME_TYPES = frozenset(
    {"date", "date_nanos", "long", "integer", "unsigned_long", "double", "float", "keyword"}
)


def flatten_mapping(response: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Field path → definition, over every index of a get-mapping response.

    Object fields contribute their children (``a.b``); multi-fields appear as
    ``text.keyword``. An alias over several indices merges them; the first
    index's definition of a field wins.
    """
    out: dict[str, dict[str, Any]] = {}

    def walk(properties: Mapping[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            if not isinstance(spec, Mapping):
                continue
            path = f"{prefix}{name}"
            out.setdefault(path, dict(spec))
            if isinstance(spec.get("properties"), Mapping):
                walk(spec["properties"], f"{path}.")
            for sub, subspec in (spec.get("fields") or {}).items():
                if isinstance(subspec, Mapping):
                    out.setdefault(f"{path}.{sub}", dict(subspec))

    for index in response.values():
        mappings = index.get("mappings") if isinstance(index, Mapping) else None
        if isinstance(mappings, Mapping) and isinstance(mappings.get("properties"), Mapping):
            walk(mappings["properties"], "")
    return out


def not_indexed(response: Mapping[str, Any], path: str) -> bool:
    """``path`` is mapped ``index: false`` in at least one index of a get-mapping response
    (a query on it fails the search there)."""
    for name, index in response.items():
        spec = flatten_mapping({name: index}).get(path)
        if spec is not None and _unsearchable(spec):
            return True
    return False


def _unsearchable(spec: Mapping[str, Any]) -> bool:
    """A field definition that says ``index: false`` (the engines refuse a query on it)."""
    return str(spec.get("index", True)).lower() == "false"


def keyword_subfields(fields: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """text field → its first keyword sub-field: exact matching and sorting use the sub-field."""
    out: dict[str, str] = {}
    for path, spec in fields.items():
        if spec.get("type") != "text":
            continue
        for sub, subspec in (spec.get("fields") or {}).items():
            if isinstance(subspec, Mapping) and subspec.get("type") == "keyword":
                out[path] = f"{path}.{sub}"
                break
    return out


def text_only_fields(
    fields: Mapping[str, Mapping[str, Any]], exact: Mapping[str, str]
) -> frozenset[str]:
    """Analysed text fields that have no keyword sub-field to filter on exactly."""
    return frozenset(
        path
        for path, spec in fields.items()
        if spec.get("type") in ("text", "match_only_text") and path not in exact
    )


def check_fields(
    spec: LuceneSpec,
    fields: Mapping[str, Mapping[str, Any]],
    exact: Mapping[str, str],
    *,
    vector_type: str,
) -> dict[str, Any] | None:
    """Check the store's configured fields against the index mapping.

    Returns the vector field's definition (None when the store has no vector field).

    Raises:
        EngineConfigError: a configured field is missing or of an unusable type;
            the message names the config key.
    """
    _check_text_fields(spec, fields)
    _check_created_at(spec, fields)
    _check_exact_fields(spec, fields, exact)
    return _vector_field(spec, fields, vector_type)


def _field_type(fields: Mapping[str, Mapping[str, Any]], path: str) -> str | None:
    spec = fields.get(path)
    if spec is None:
        return None
    return str(spec.get("type", "object"))


def _check_text_fields(spec: LuceneSpec, fields: Mapping[str, Mapping[str, Any]]) -> None:
    for tf in parse_text_fields(spec.search.text_fields):
        if "*" in tf.name:
            continue  # a pattern: the engine expands it; nothing to check by name
        if _field_type(fields, tf.name) is None:
            raise EngineConfigError(
                f"search.text_fields: field {tf.name!r} is not in the index mapping"
            )
        if _unsearchable(fields[tf.name]):  # every search would fail
            raise EngineConfigError(
                f"search.text_fields: field {tf.name!r} is mapped index: false (stored, "
                "not searchable)"
            )


def _check_created_at(spec: LuceneSpec, fields: Mapping[str, Mapping[str, Any]]) -> None:
    created_at = spec.fields.created_at
    if not created_at:
        return
    t = _field_type(fields, created_at)
    if t is None:
        raise EngineConfigError(
            f"mapping.created_at: field {created_at!r} is not in the index mapping"
        )
    if t not in _SORTABLE_TIME_TYPES:
        raise EngineConfigError(
            f"mapping.created_at: field {created_at!r} is of type {t!r}, which cannot be "
            "sorted as a time (use a date field)"
        )


def _check_exact_fields(
    spec: LuceneSpec, fields: Mapping[str, Mapping[str, Any]], exact: Mapping[str, str]
) -> None:
    """The fields matched or grouped on exactly: keyword-like, or text with a keyword sub-field."""
    m, s = spec.fields, spec.search

    def need_exact(key: str, path: str) -> None:
        t = _field_type(fields, path)
        if t is None:
            raise EngineConfigError(f"{key}: field {path!r} is not in the index mapping")
        if t not in _EXACT_TYPES and path not in exact:
            raise EngineConfigError(
                f"{key}: field {path!r} is of type {t!r}; it needs a keyword field "
                "(or a text field with a keyword sub-field)"
            )

    if m.key:
        need_exact("mapping.key", m.key)
    if m.id != ID_FIELD:
        need_exact("mapping.id", m.id)
    # Scope fields must match exactly: a phrase match on analysed text would let the
    # value 'team-a' admit a document whose ACL says 'team-a-admins'.
    if m.owner:
        need_exact("mapping.owner", m.owner)
    for i, scope_field in enumerate(m.scope):
        need_exact(f"scope.filters[{i}].field", scope_field)
    if s.collapse_group:
        if not m.group:
            raise EngineConfigError("search.collapse_group needs mapping.group")
        need_exact("mapping.group", m.group)


def _vector_field(
    spec: LuceneSpec, fields: Mapping[str, Mapping[str, Any]], vector_type: str
) -> dict[str, Any] | None:
    vector_field = spec.search.vector_field
    if not vector_field:
        return None
    vector = fields.get(vector_field)
    if vector is None:
        raise EngineConfigError(
            f"search.vector_field: field {vector_field!r} is not in the index mapping"
        )
    if vector.get("type") != vector_type:
        raise EngineConfigError(
            f"search.vector_field: field {vector_field!r} is of type "
            f"{vector.get('type', 'object')!r}, not {vector_type!r}"
        )
    return dict(vector)
