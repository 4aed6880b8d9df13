"""The one place a store config becomes its connector's spec (connectors import no gateway)."""

from __future__ import annotations

from pydantic import SecretStr

from connectors.spec import (
    AwsSigV4,
    ConnectionSpec,
    ConnectorSpec,
    FieldsSpec,
    SearchSpec,
    Secret,
)
from gateway.config import (
    ConnectionConfig,
    ElasticsearchConnection,
    LuceneSearchConfig,
    OpenSearchConnection,
    QdrantConnection,
    QdrantSearchConfig,
    StoreConfig,
)


def _secret(value: SecretStr | None) -> Secret | None:
    return Secret(value.get_secret_value()) if value is not None else None


def _connection(c: ConnectionConfig) -> ConnectionSpec:
    if isinstance(c, QdrantConnection):
        return ConnectionSpec(
            url=c.url,
            path=c.path,
            location=c.location,
            api_key=_secret(c.api_key),
            access_token=_secret(c.access_token),
            prefer_grpc=c.prefer_grpc,
            grpc_port=c.grpc_port,
            ca_certs=c.ca_certs,
            verify_certs=c.verify_certs,
            timeout_ms=c.timeout_ms,
            pool_maxsize=c.pool_maxsize,
            retries=c.retries,
        )
    sigv4 = c.aws_sigv4 if isinstance(c, OpenSearchConnection) else None
    return ConnectionSpec(
        hosts=tuple(c.hosts),
        cloud_id=_secret(c.cloud_id) if isinstance(c, ElasticsearchConnection) else None,
        api_key=_secret(c.api_key),
        username=c.username,
        password=_secret(c.password),
        bearer_token=_secret(c.bearer_token),
        ca_certs=c.ca_certs,
        verify_certs=c.verify_certs,
        aws_sigv4=AwsSigV4(region=sigv4.region, service=sigv4.service) if sigv4 else None,
        timeout_ms=c.timeout_ms,
        pool_maxsize=c.pool_maxsize,
        retries=c.retries,
        sniff=c.sniff,
        sniff_interval_ms=c.sniff_interval_ms,
        max_header_bytes=c.max_header_bytes,
        max_body_bytes=c.max_body_bytes,
        max_decoded_bytes=c.max_decoded_bytes,
    )


def connector_spec(config: StoreConfig) -> ConnectorSpec:
    """What the store's connector needs to know, and nothing of A2M."""
    m, s = config.mapping, config.search
    lucene = s if isinstance(s, LuceneSearchConfig) else None
    sparse = s.sparse_vector if isinstance(s, QdrantSearchConfig) else None
    return ConnectorSpec(
        backend=config.backend.value,
        index=config.index,
        connection=_connection(config.connection),
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
