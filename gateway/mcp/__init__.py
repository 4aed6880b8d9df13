"""MCP front door: the same stores, auth, scopes, limits, metrics and audit as A2M.

``tools`` turns MCP tool calls into A2M calls on the store's dispatcher,
``schemas`` builds the tools' input and output schemas from each store's
mapping, ``render`` shapes records into results within a character budget,
``server`` serves them over Streamable HTTP (``/mcp``, ``/mcp/<store>``) and
stdio, ``single_call`` answers a well-formed 2026-07-28 ``tools/call`` without
the SDK's per-request machinery. See docs/mcp.md.
"""
