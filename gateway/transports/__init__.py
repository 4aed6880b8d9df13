"""Transports move messages and know nothing of engines.

HTTP (§8.3), stdio (§8.2) and in-process (§8.1) all drive the same dispatcher.
"""
