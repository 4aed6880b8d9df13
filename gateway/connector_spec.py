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
from gateway.config import StoreConfig


def _secret(value: SecretStr | None) -> Secret | None:
    return Secret(value.get_secret_value()) if value is not None else None


def connector_spec(config: StoreConfig) -> ConnectorSpec:
    """What the store's connector needs to know, and nothing of A2M."""
    c, m, s = config.connection, config.mapping, config.search
    return ConnectorSpec(
        backend=config.backend.value,
        index=config.index,
        connection=ConnectionSpec(
            hosts=tuple(c.hosts),
            cloud_id=_secret(c.cloud_id),
            url=c.url,
            path=c.path,
            location=c.location,
            api_key=_secret(c.api_key),
            username=c.username,
            password=_secret(c.password),
            bearer_token=_secret(c.bearer_token),
            ca_certs=c.ca_certs,
            verify_certs=c.verify_certs,
            aws_sigv4=(
                AwsSigV4(region=c.aws_sigv4.region, service=c.aws_sigv4.service)
                if c.aws_sigv4 is not None
                else None
            ),
            timeout_ms=c.timeout_ms,
            pool_maxsize=c.pool_maxsize,
            retries=c.retries,
        ),
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
            text_fields=tuple(s.text_fields),
            vector_field=s.vector_field,
            sparse_vector=s.sparse_vector,
            sparse_analyzer=s.sparse_analyzer,
            collapse_group=s.collapse_group,
            highlight=s.highlight,
            highlight_fragment_size=s.highlight_fragment_size,
        ),
    )
