"""The A2M recall each quality mode sends through the gateway, and the stores that answer it.

One store per engine answers bm25, dense and hybrid by what a call carries; a mode whose
query text the gateway embeds (``*-minilm``) gets a store of its own.
"""

from __future__ import annotations

import asyncio
import copy
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.quality.collection import Split
from bench.quality.engines import Loaded, doc_id_of

MODES = ("bm25", "dense", "hybrid")
EMBEDDED = {"dense-minilm": "dense", "hybrid-minilm": "hybrid"}
"""Modes whose query text the gateway embeds (kind minilm), and the store mode each uses."""
LIMIT = 100


def mode_params(mode: str, text: str, vector: list[float], limit: int = LIMIT) -> dict[str, Any]:
    if mode == "bm25" or mode in EMBEDDED:
        return {"query": text, "limit": limit}
    if mode == "dense":
        return {"embedding": vector, "limit": limit}
    return {"query": text, "embedding": vector, "limit": limit}


async def recall_all(
    base_url: str,
    store: str,
    mode: str,
    split: Split,
    concurrency: int,
    limit: int = LIMIT,
) -> tuple[dict[str, list[str]], list[float], int]:
    """Every evaluated query through POST /a2m/<store>: rankings, latencies, error count."""
    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[str] = asyncio.Queue()
    for qid in split.query_ids:
        queue.put_nowait(qid)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=60.0, limits=limits) as http:

        async def worker() -> None:
            nonlocal errors
            while True:
                try:
                    qid = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                params = mode_params(mode, split.sf.queries[qid], split.sf.query_vector(qid), limit)
                body = {"jsonrpc": "2.0", "id": qid, "method": "memory/recall", "params": params}
                start = time.perf_counter()
                try:
                    r = await http.post(f"/a2m/{store}", json=body)
                    answer = r.json()
                except (httpx.HTTPError, ValueError):
                    answer = {}
                latencies.append(time.perf_counter() - start)
                if "result" not in answer:
                    errors += 1
                    continue
                rankings[qid] = [doc_id_of(rec) for rec in answer["result"]["records"]]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return rankings, latencies, errors


def store_name(engine: str, mode: str) -> str:
    return f"{engine}-{mode}" if mode in EMBEDDED else engine


def gateway_config(
    loaded: Sequence[Loaded], modes: Sequence[str] = (), weights: str = "auto"
) -> dict[str, Any]:
    """One store per engine, plus one per embedded mode (Qdrant: on a copy of its directory,
    since local mode locks a path to one client)."""
    stores = {item.engine: item.store for item in loaded}
    for item in loaded:
        for mode in (m for m in modes if m in EMBEDDED):
            store = copy.deepcopy(item.store)
            store["search"]["mode"] = EMBEDDED[mode]
            store["search"]["embedder"] = {"kind": "minilm", "weights": weights}
            if item.engine == "qdrant":
                path = Path(store["connection"]["path"])
                copy_path = path.with_name(f"{path.name}-{mode}")
                shutil.copytree(path, copy_path, dirs_exist_ok=True)
                store["connection"]["path"] = str(copy_path)
            stores[store_name(item.engine, mode)] = store
    return {
        "server": {"name": "a2m-bench", "request_timeout_ms": 60_000, "log_level": "warning"},
        "stores": stores,
    }
