"""The one place a store config becomes its connector's spec (connectors import no gateway)."""

from __future__ import annotations

from connectors.spec import ConnectionSpec, ConnectorSpec, FieldsSpec, PassageSpec, SearchSpec
from gateway.config import StoreBase
from gateway.stages.passages import SEPARATOR

HIGHLIGHTING_BACKENDS = frozenset({"elasticsearch", "opensearch"})
"""Engines whose highlighter chooses passages (``search.passages.by: engine``)."""


def engine_passages(config: StoreBase) -> PassageSpec | None:
    """The passages the store's engine chooses, or None when the gateway does (or none)."""
    p = config.search.passages
    if p is None or not p.enabled or p.by != "engine" or not config.mapping.content:
        return None
    if config.backend not in HIGHLIGHTING_BACKENDS:
        return None
    # As the gateway's windows: the count of passages and their separators within the cap.
    per = max(p.max_chars // p.count - len(SEPARATOR), 1)
    return PassageSpec(max_chars=p.max_chars, count=p.count, fragment_chars=per)


def connector_spec(config: StoreBase) -> ConnectorSpec[ConnectionSpec]:
    """What the store's connector needs to know, and nothing of A2M: the connection is
    the engine's own spec, made by its ``connection:`` model."""
    m, s = config.mapping, config.search
    return ConnectorSpec(
        backend=config.backend,
        index=config.index,
        connection=config.connection.spec(),
        fields=FieldsSpec(
            id=m.id,
            read=tuple(m.source_fields()),
            content=m.content,
            created_at=m.created_at,
            group=m.group,
            key=m.key,
            owner=m.owner,
            scope=tuple(rule.field for rule in config.scope.filters),
        ),
        search=SearchSpec(
            mode=s.mode.value,
            vector_field=s.vector_field,
            passages=engine_passages(config),
            **s.spec_keys(),
        ),
    )
