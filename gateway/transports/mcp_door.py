"""The MCP door on the HTTP port, loaded on its first request.

The MCP SDK and its session manager are a fifth of the gateway's start-up and
about a sixth of its memory; a gateway whose callers speak A2M never needs
them. This ASGI app stands at ``/mcp``, ``/mcp/<store>`` and the protected
resource metadata from the start, and imports :mod:`gateway.mcp.server` (in a
thread, so the event loop keeps answering) when the first request arrives
there. The session manager then runs in a task of its own until the app's
lifespan ends.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from gateway.config import ServerConfig

if TYPE_CHECKING:
    from gateway.runtime import Gateway
    from gateway.transports.admission import Admission


class McpDoor:
    """ASGI app of the MCP paths; the SDK's app is built on the first call."""

    def __init__(self, gateway: Gateway, server: ServerConfig, admission: Admission) -> None:
        self._parts = (gateway, server, admission)
        self._app: Any = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app if self._app is not None else await self._load()
        await app(scope, receive, send)

    async def _load(self) -> Any:
        async with self._lock:
            if self._app is None:
                module = await asyncio.to_thread(importlib.import_module, "gateway.mcp.server")
                app = module.McpHttpApp(*self._parts)
                started = asyncio.Event()
                self._stop = asyncio.Event()
                self._runner = asyncio.create_task(self._run(app, started))
                await started.wait()
                if self._runner.done():  # the session manager could not start
                    self._runner.result()
                self._app = app
        return self._app

    async def _run(self, app: Any, started: asyncio.Event) -> None:
        try:
            async with app.run():
                started.set()
                await self._stop.wait()
        finally:
            started.set()

    async def close(self) -> None:
        """Stop the session manager, if a request started it; the next request starts anew."""
        runner, self._runner, self._app = self._runner, None, None
        if runner is not None:
            self._stop.set()
            await runner
