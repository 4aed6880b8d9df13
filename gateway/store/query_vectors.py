"""Query vectors held to the store's index: the caller's, and its own embedder's.

:func:`check_vector` refuses a caller's vector the index cannot compare. A width of
the store's own embedder that disagrees with the index is the server's fault, never
the caller's: refused at start when the embedder knows its width, else answered as
an internal error (not the caller's -32008).
"""

from __future__ import annotations

import logging
import math
from array import array

from connectors.base import EngineInfo
from connectors.errors import EngineConfigError
from gateway.a2m.errors import EmbeddingMismatch, InternalError, InvalidParams
from gateway.embedders import QueryEmbedder

log = logging.getLogger(__name__)

_F32_MAX = 3.4028234663852886e38


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


def check_vector(vector: list[float], info: EngineInfo | None) -> None:
    """A query vector the store's vectors can be compared with.

    Raises:
        EmbeddingMismatch: its width is not the store's.
        InvalidParams: non-finite, too large for 32-bit floats, or zero under cosine.
    """
    assert info is not None
    assert info.vectors is not None  # the embeddings capability is gated before
    dims = info.vectors.dimensions
    if dims is not None and len(vector) != dims:
        raise EmbeddingMismatch(
            f"embedding has {len(vector)} dimensions; this store's vectors have {dims}",
            data={"expected": dims, "got": len(vector)},
        )
    # No generator over the dimensions: each of its hundreds of steps is a Python call.
    if not all(map(math.isfinite, vector)):
        raise InvalidParams("embedding must contain finite numbers only")
    # Found by fuzzing: engines hold 32-bit floats, and refuse (or overflow on) a query
    # whose values or squared norm leave that range, or a zero vector under cosine.
    f32 = array("f", vector)
    square = math.fsum(array("f", [x * x for x in f32]))  # squares as the engine rounds them
    if not all(map(math.isfinite, f32)) or not square <= _F32_MAX:
        raise InvalidParams("embedding is too large for 32-bit float vectors")
    if square == 0.0 and info.vectors.metric == "cosine":
        raise InvalidParams("embedding has zero length: cosine gives it no direction")
