"""`check`'s comparison of a store's stored vectors with its embedder's vectors of the same text.

A query embedder that is not the model the corpus was embedded with still
returns vectors of the right width, and every dense query then ranks
meaninglessly without any error. Re-embedding a few records' content and
comparing with what the index holds catches that before serving: vectors of
one model on one text agree to a cosine near 1 (0.999+ for all-MiniLM-L6-v2
int8 against the fp32 reference, 0.97+ when the mapped content is not exactly
the embedded text); another model's vectors land near 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.store.sampling import sample_vectors

if TYPE_CHECKING:
    from gateway.store.store import Store

AGREE_COSINE = 0.9
"""Below this, the stored vectors were not made by the configured embedder from this content."""


@dataclass(frozen=True, slots=True)
class VectorAgreement:
    compared: int
    min_cosine: float
    mean_cosine: float

    @property
    def agrees(self) -> bool:
        return self.min_cosine >= AGREE_COSINE

    def to_dict(self) -> dict[str, object]:
        return {
            "compared": self.compared,
            "min_cosine": round(self.min_cosine, 4),
            "mean_cosine": round(self.mean_cosine, 4),
            "agrees": self.agrees,
        }


def _cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0


async def compare_stored_vectors(store: Store, n: int = 5) -> VectorAgreement | None:
    """Cosine of the newest n records' stored vectors to their re-embedded content.

    None when there is nothing to compare: no embedder, no vectors in the
    index, or no record with both content and a vector of the embedder's width.

    Raises:
        connectors.errors.ConnectorError: the engine cannot be read.
        gateway.resilience.GuardRefusal: the store's guard refused the read.
        gateway.embedders.EmbedderUnavailable: the embedder fails.
    """
    await store.ensure_started()
    if store.embedder is None or store.info is None or store.info.vectors is None:
        return None
    cosines = []
    for content, stored in await sample_vectors(store, n):
        if not stored or not content:
            continue
        vector = await store.embedder.embed_query(content)
        if len(vector) == len(stored):
            cosines.append(_cosine(vector, stored))
    if not cosines:
        return None
    return VectorAgreement(len(cosines), min(cosines), sum(cosines) / len(cosines))
