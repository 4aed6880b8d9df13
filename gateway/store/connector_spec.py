"""The one place a store config becomes its connector's spec (connectors import no gateway)."""

from __future__ import annotations

from connectors.spec import ConnectionSpec, ConnectorSpec, FieldsSpec, SearchSpec
from gateway.config import StoreBase


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
            **s.spec_keys(),
        ),
    )
