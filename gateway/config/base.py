"""What every config model shares: strictness, the config error, the backend names."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class ConfigError(Exception):
    """The config file is missing, unreadable, or invalid; the message names the field."""


class StrictModel(BaseModel):
    """Unknown keys are refused (a typo must not silently mean a default) and values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Backend(StrEnum):
    ELASTICSEARCH = "elasticsearch"
    OPENSEARCH = "opensearch"
    QDRANT = "qdrant"


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False
