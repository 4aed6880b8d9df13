"""What every config model shares: strictness, the config error, the backend names."""

from __future__ import annotations

from enum import StrEnum

from connectors.config import StrictModel

__all__ = ["Backend", "ConfigError", "StrictModel", "is_loopback"]


class ConfigError(Exception):
    """The config file is missing, unreadable, or invalid; the message names the field."""


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
