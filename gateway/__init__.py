"""a2m-gateway: a read-only A2M 0.1 server in front of existing search indexes."""

PROTOCOL = "a2m/0.1"
__version__ = "0.1.0"
