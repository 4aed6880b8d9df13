"""memory/describe answers from the config while the store's engine cannot be reached.

A real socket nobody listens on stands in for the down engine: the connector's own
failure path runs, and every read still refuses with engine_unavailable.
"""

from __future__ import annotations

import socket

import pytest

from gateway.a2m.errors import A2MError, ErrorCode
from gateway.config import parse_config
from gateway.runtime import Gateway


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


def _config(port: int) -> dict[str, object]:
    return {
        "stores": {
            "docs": {
                "backend": "elasticsearch",
                "index": "docs",
                "description": "the team's notes",
                "connection": {
                    "hosts": [f"http://127.0.0.1:{port}"],
                    "timeout_ms": 2000,
                    "retries": 0,
                },
                "mapping": {"content": "body", "uri": "link", "key": "slug"},
                "search": {"text_fields": ["body"]},
                "limits": {"max_recall_limit": 40},
            }
        }
    }


async def test_describe_answers_while_the_engine_is_down() -> None:
    gateway = Gateway(parse_config(_config(_closed_port())))
    dispatcher = gateway.dispatcher("docs")
    try:
        described = await dispatcher.dispatch("memory/describe", {})
        assert described["name"] == "docs"
        assert described["description"] == "the team's notes"
        assert described["capabilities"] == ["core", "external", "keys", "prompt"]
        assert "memory/fetch" in described["methods"]
        assert described["limits"]["max_recall_limit"] == 40
        assert "embeddings" not in described  # the index decides it: unknown until read
        # Control: the engine really is down, and a read says so.
        with pytest.raises(A2MError) as info:
            await dispatcher.dispatch("memory/recall", {"query": "x"})
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        assert info.value.data["reason"] == "engine_unavailable"
    finally:
        await gateway.close()
