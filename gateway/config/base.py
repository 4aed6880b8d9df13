"""What every config model shares: strictness and the config error."""

from __future__ import annotations

from connectors.config import StrictModel

__all__ = ["ConfigError", "StrictModel", "is_loopback"]


class ConfigError(Exception):
    """The config file is missing, unreadable, or invalid; the message names the field."""


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
