"""Which engine field becomes which A2M record field."""

from __future__ import annotations

import string
from datetime import UTC, datetime

from pydantic import Field, field_validator, model_validator

from gateway.config.base import StrictModel

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class MappingConfig(StrictModel):
    """Which document field becomes which A2M record field (dotted paths allowed)."""

    id: str = "_id"
    content: str | None = None
    content_template: str | None = Field(
        default=None, description="Python format string over fields, e.g. '{title}\\n\\n{text}'"
    )
    uri: str | None = None
    media_type: str | None = None
    media_type_value: str | None = None
    media_type_from_uri: bool = False
    key: str | None = None
    group: str | None = None
    role: str | None = None
    owner: str | None = Field(
        default=None,
        description="the record's owner; on local transports the caller's `owner` filters it",
    )
    created_at: str | None = None
    created_at_fallback: datetime = Field(
        default=EPOCH,
        description="the created_at of a record whose document has no date (RFC 3339; "
        "default the Unix epoch): every A2M record carries one",
    )
    updated_at: str | None = None
    metadata: list[str] = Field(default_factory=list)

    @field_validator("created_at_fallback")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

    def created_at_warning(self) -> str | None:
        """Why `check` should warn about created_at, if it should."""
        if self.created_at:
            return None
        return (
            "mapping.created_at is not set: every record carries created_at "
            f"{self.created_at_fallback.isoformat().replace('+00:00', 'Z')} "
            "(mapping.created_at_fallback), and timeline order is the engine's stable id or "
            "index order, not creation time"
        )

    @model_validator(mode="after")
    def _one_source(self) -> MappingConfig:
        if self.content and self.content_template:
            raise ValueError("mapping: set content or content_template, not both")
        if sum([bool(self.media_type), bool(self.media_type_value), self.media_type_from_uri]) > 1:
            raise ValueError(
                "mapping: set one of media_type, media_type_value, media_type_from_uri"
            )
        if self.media_type_from_uri and not self.uri:
            raise ValueError("mapping.media_type_from_uri needs mapping.uri")
        if self.content_template:
            try:
                template_fields(self.content_template)
            except ValueError as exc:
                raise ValueError(f"mapping.content_template: {exc}") from None
        return self

    def source_fields(self) -> list[str]:
        """Every engine field the mapping reads: the only fields fetched from the engine."""
        fields = [
            f
            for f in (
                self.content,
                self.uri,
                self.media_type,
                self.key,
                self.group,
                self.role,
                self.owner,
                self.created_at,
                self.updated_at,
            )
            if f
        ]
        if self.id != "_id":
            fields.append(self.id)
        if self.content_template:
            fields.extend(template_fields(self.content_template))
        fields.extend(self.metadata)
        return list(dict.fromkeys(fields))


def template_fields(template: str) -> list[str]:
    """Field names a content template reads; raises ValueError on a malformed template."""
    names: list[str] = []
    for _, name, spec, conv in string.Formatter().parse(template):
        if name is None:
            continue
        if not name or name.isdigit():
            raise ValueError("placeholders must name a field, e.g. {title}")
        if spec or conv:
            raise ValueError("format specs and conversions are not supported")
        names.append(name)
    if not names:
        raise ValueError("the template names no field")
    return names
