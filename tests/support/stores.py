"""Stores a test opens against a real engine, closed however the test ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.store.store import Store


@asynccontextmanager
async def started(*stores: Store) -> AsyncIterator[None]:
    """Each of ``stores`` started, in order; all of them closed on the way out (a store
    that failed to start, or was never reached, included)."""
    try:
        for store in stores:
            await store.ensure_started()
        yield
    finally:
        for store in stores:
            await store.close()
