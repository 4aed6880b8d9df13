"""The one place a store config becomes its connector's spec (connectors import no gateway)."""

from __future__ import annotations

from connectors.spec import ConnectorSpec, FieldsSpec, SearchSpec
from gateway.config import LuceneSearchConfig, QdrantSearchConfig, StoreConfig


def connector_spec(config: StoreConfig) -> ConnectorSpec:
    """What the store's connector needs to know, and nothing of A2M."""
    m, s = config.mapping, config.search
    lucene = s if isinstance(s, LuceneSearchConfig) else None
    sparse = s.sparse_vector if isinstance(s, QdrantSearchConfig) else None
    return ConnectorSpec(
        backend=config.backend.value,
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
            text_fields=tuple(lucene.text_fields) if lucene else (),
            vector_field=s.vector_field,
            sparse_vector=sparse,
            sparse_analyzer=s.sparse_analyzer if isinstance(s, QdrantSearchConfig) else "light",
            collapse_group=lucene.collapse_group if lucene else False,
            highlight=lucene.highlight if lucene else False,
            highlight_fragment_size=lucene.highlight_fragment_size if lucene else 300,
        ),
    )
