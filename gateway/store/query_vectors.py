"""The store's own query embedder, held to its index: the width at start, each vector after.

A width that disagrees with the index is the server's fault, never the caller's:
refused at start when the embedder knows its width, else answered as an internal
error (not the caller's -32008).
"""

from __future__ import annotations

import logging

from connectors.base import EngineInfo
from connectors.errors import EngineConfigError
from gateway.a2m.errors import InternalError
from gateway.embedders import QueryEmbedder
from gateway.store.planner import check_vector

log = logging.getLogger(__name__)


def check_width(store: str, embedder: QueryEmbedder | None, info: EngineInfo) -> None:
    """Raises: EngineConfigError: the embedder's declared width is not the index's."""
    if embedder is None or info.vectors is None or info.vectors.dimensions is None:
        return
    width = embedder.dimensions
    if width is not None and width != info.vectors.dimensions:
        raise EngineConfigError(
            f"stores.{store}.search.embedder: it gives {width}-dimensional vectors; "
            f"the index holds {info.vectors.dimensions}"
        )


async def embed_query(
    store: str, embedder: QueryEmbedder | None, text: str, info: EngineInfo | None
) -> list[float]:
    """The query text's vector, checked against the index.

    Raises:
        EmbedderUnavailable: the embedder failed.
        InternalError: it gave a vector of another width than the index's.
        InvalidParams: see check_vector.
    """
    assert embedder is not None  # config validation requires one for these modes
    dense = await embedder.embed_query(text)
    assert info is not None
    assert info.vectors is not None
    dims = info.vectors.dimensions
    if dims is not None and len(dense) != dims:
        log.error("store %s: embedder gave %d dimensions, index has %d", store, len(dense), dims)
        raise InternalError(
            "The store's query embedder does not match its index",
            data={"reason": "embedder_mismatch", "retryable": False},
        )
    check_vector(dense, info)
    return dense
