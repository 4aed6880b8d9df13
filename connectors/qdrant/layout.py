"""What a Qdrant collection holds, checked once at open(): the layout every read relies on.

Changes with Qdrant's collection configuration (vector params, sparse vectors,
payload indexes, as either engine reports them in a :class:`Shape`), not with how a
request is asked: the read path only reads the :class:`Layout` this returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from connectors.base import IndexNeed, Metric, VectorInfo
from connectors.errors import EngineConfigError
from connectors.qdrant.spec import has_vectors

if TYPE_CHECKING:
    from connectors.qdrant.engine import Shape
    from connectors.qdrant.spec import QdrantSpec

METRICS: Final[tuple[Metric, ...]] = ("cosine", "dot", "l2")
"""Every distance a Qdrant dense vector can be configured for that A2M can name."""

_METRIC_OF: Final[dict[str, Metric]] = {"Cosine": "cosine", "Dot": "dot", "Euclid": "l2"}


@dataclass(frozen=True, slots=True)
class Layout:
    """The vectors a store may query: the dense one (named or default) and the sparse one."""

    dense_name: str | None = None
    has_dense: bool = False
    metric: Metric = "cosine"
    sparse_name: str | None = None
    vectors: VectorInfo | None = None
    indexes: tuple[IndexNeed, ...] = ()


def inspect_collection(shape: Shape, spec: QdrantSpec) -> Layout:
    """Check the configured vectors exist and fix the dense metric.

    Raises:
        EngineConfigError: the configured dense or sparse vector is missing, the
            sparse vector lacks the IDF modifier, the collection has no payload index
            to order by ``mapping.created_at``, or the distance is not one A2M can name.
    """
    s = spec.search
    dense_cfg = _dense_config(shape, spec)
    sparse_name = _sparse_name(shape, spec)

    indexes = index_needs(shape, spec)
    missing_order = [n for n in indexes if n.kinds == _RANGE and not n.present]
    if missing_order:
        raise EngineConfigError(
            "mapping.created_at needs a datetime, integer or float payload index "
            "in the qdrant collection (create_payload_index, or qdrant-edge's "
            "create_field_index) to order by it"
        )

    if dense_cfg is None:
        return Layout(dense_name=s.vector_field, sparse_name=sparse_name, indexes=indexes)
    size, distance = dense_cfg
    metric = _METRIC_OF.get(distance)
    if metric is None:
        raise EngineConfigError(
            "the dense vector's distance is not cosine, dot or euclid (A2M cannot name it)"
        )
    return Layout(
        dense_name=s.vector_field,
        has_dense=True,
        metric=metric,
        sparse_name=sparse_name,
        vectors=VectorInfo(dimensions=size, metric=metric, metrics=METRICS),
        indexes=indexes,
    )


def _dense_config(shape: Shape, spec: QdrantSpec) -> tuple[int, str] | None:
    """The dense vector searched: the named one, else the collection's unnamed default."""
    s = spec.search
    vectors = shape.dense
    if s.vector_field is not None:
        if s.vector_field not in vectors:
            raise EngineConfigError(
                "the dense vector named by search.vector_field is not in the collection"
            )
        return vectors[s.vector_field]
    if "" in vectors:
        return vectors[""]
    if vectors and has_vectors(spec):
        raise EngineConfigError(
            "the collection has only named dense vectors: set search.vector_field"
        )
    if has_vectors(spec):
        raise EngineConfigError(
            f"search.mode '{s.mode}' needs a dense vector and the collection has none"
        )
    return None


def _sparse_name(shape: Shape, spec: QdrantSpec) -> str | None:
    """The sparse vector of the lexical leg, checked to carry Qdrant's IDF modifier."""
    name = spec.search.sparse_vector
    if name is None:
        return None
    idf = shape.sparse.get(name)
    if idf is None:
        raise EngineConfigError(
            "the sparse vector named by search.sparse_vector is not in the collection"
        )
    if not idf:
        # Query vectors carry term weights only (connectors.qdrant.sparse):
        # without Qdrant's IDF modifier every term would weigh alike.
        raise EngineConfigError(
            "search.sparse_vector: the collection's sparse vector needs modifier idf "
            "(the gateway's lexical encoding sends term weights and leaves IDF to Qdrant)"
        )
    return name


_RANGE: Final = ("datetime", "integer", "float")
_KEYWORD: Final = ("keyword",)
_SCAN: Final = (
    "slower: each filtered read checks payloads point by point, "
    "and a collection in strict mode refuses the filter"
)


def index_needs(shape: Shape, spec: QdrantSpec) -> tuple[IndexNeed, ...]:
    """The payload indexes a collection needs for the store's mapping, and which it has.

    ``order_by`` on ``mapping.created_at`` needs a range-capable index (refused at
    open without one); exact matches on the key, group, owner and scope fields
    use a keyword index (without one they scan, and strict mode refuses them).
    Key-prefix matching runs a word prefilter on the key field and checks the
    exact prefix itself, so a keyword index on the key serves it too.
    """
    schema = shape.payload_schema

    def has(field: str, kinds: tuple[str, ...]) -> bool:
        return schema.get(field) in kinds

    f = spec.fields
    needs: list[IndexNeed] = []
    if f.created_at:
        needs.append(
            IndexNeed(
                f.created_at,
                _RANGE,
                has(f.created_at, _RANGE),
                "mapping.created_at: timeline and recall without a query order by it",
                "refused at open: qdrant cannot order_by a field without a range index",
            )
        )
    purposes: dict[str | None, str] = {
        f.key: "mapping.key: fetch, where and key_prefix match it",
        f.group: "mapping.group: where matches it",
        f.owner: "mapping.owner: where and owner match it",
        **{field: "scope.filters: every read of a scoped caller matches it" for field in f.scope},
    }
    for field, purpose in purposes.items():
        if field and field != f.created_at:
            needs.append(IndexNeed(field, _KEYWORD, has(field, _KEYWORD), purpose, _SCAN))
    return tuple(needs)
