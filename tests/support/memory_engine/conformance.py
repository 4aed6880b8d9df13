"""The memory engine's conformance backend: the packaged demo corpus in a JSON file.

Named by the engine's registry entry (``conformance``), so the conformance suite runs
on a ``memory`` store wherever the engine is installed
(``A2M_GATEWAY_ENGINES=tests.support.memory_engine``). The engine keeps no dense
vectors: it gives no vector hook, and the suite's embeddings tests skip it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from gateway.demo import DEMO_STORE, chunks, default_demo_config
from tests.support.conformance import ConformanceBackend, Seeding
from tests.support.demo_loader import documents


def demo_store(seeding: Seeding) -> dict[str, Any]:
    """The demo corpus written to ``demo.json`` under the seeding's directory, and the
    store reading it with the embedded demo's mapping."""
    path = seeding.root / "demo.json"
    docs = [{"id": doc_id, **source} for doc_id, source in documents(chunks())]
    path.write_bytes(orjson.dumps(docs))
    mapping = default_demo_config(Path("/nonexistent")).stores[DEMO_STORE].mapping
    return {
        "backend": "memory",
        "index": "demo",
        "description": "Documentation of A2M and this gateway, packaged as a demo (memory)",
        "connection": {"documents": str(path)},
        "mapping": mapping.model_dump(mode="json", exclude_defaults=True),
        "search": {"mode": "lexical"},
    }


BACKENDS = {"memory": ConformanceBackend(demo_store)}
