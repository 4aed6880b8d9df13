"""Write test collections into qdrant-edge shards with qdrant-client's own models.

The suites describe their collections with qdrant-client models (the same code writes
to a Qdrant server); :class:`EdgeWriter` takes those models and writes the shard
``<path>/<collection>`` that a ``connection.path`` store reads, through qdrant-edge's
public API. Only the calls the suites make are offered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import qdrant_edge as qe

from connectors.base import Metric, SparseVector
from connectors.qdrant.shard import ShardPoint, create_shard, shard_dir, write_points

_METRIC: dict[str, Metric] = {"Cosine": "cosine", "Dot": "dot", "Euclid": "l2"}
_ALWAYS_INDEXED = {"created_at": "datetime", "ts": "datetime"}
"""Date fields the suites order by, indexed in every collection: qdrant-edge (like a
server) orders only by an indexed field, and the connector checks the index at open."""


class EdgeWriter:
    """The write calls of qdrant-client's ``QdrantClient``, on shards under ``path``."""

    def __init__(self, path: Path | str) -> None:
        self._path = str(path)
        self._open: dict[str, qe.EdgeShard] = {}

    def _shard(self, collection: str) -> qe.EdgeShard:
        if collection not in self._open:
            self._open[collection] = qe.EdgeShard.load(shard_dir(self._path, collection))
        return self._open[collection]

    def collection_exists(self, collection: str) -> bool:
        return Path(shard_dir(self._path, collection), "edge_config.json").is_file()

    def delete_collection(self, collection: str) -> None:
        import shutil

        shard = self._open.pop(collection, None)
        if shard is not None:
            shard.close()
        shutil.rmtree(shard_dir(self._path, collection), ignore_errors=True)

    def create_collection(
        self, collection: str, vectors_config: Any = None, sparse_vectors_config: Any = None
    ) -> None:
        dense: dict[str, tuple[int, Metric]] = {}
        if isinstance(vectors_config, dict):
            dense = {n: (p.size, _METRIC[_name(p.distance)]) for n, p in vectors_config.items()}
        elif vectors_config is not None:
            dense = {"": (vectors_config.size, _METRIC[_name(vectors_config.distance)])}
        sparse = dict(sparse_vectors_config or {})
        if any(p.modifier is None for p in sparse.values()):
            shard = qe.EdgeShard.create(
                shard_dir(self._path, collection),
                qe.EdgeConfig(
                    vectors={
                        n: qe.EdgeVectorParams(size=s, distance=_edge_distance(m))
                        for n, (s, m) in dense.items()
                    }
                    or None,
                    sparse_vectors={
                        n: qe.EdgeSparseVectorParams(
                            modifier=qe.Modifier.Idf if p.modifier is not None else None
                        )
                        for n, p in sparse.items()
                    },
                ),
            )
        else:
            shard = create_shard(
                shard_dir(self._path, collection), dense=dense, sparse_idf=list(sparse)
            )
        self._open[collection] = shard
        for field, kind in _ALWAYS_INDEXED.items():
            self.create_payload_index(collection, field, kind)

    def upsert(self, collection: str, points: list[Any], wait: bool = True) -> None:
        shard = self._shard(collection)
        write_points(shard, [_point(p) for p in points])

    def set_payload(self, collection: str, payload: dict[str, Any], points: list[Any]) -> None:
        self._shard(collection).update(qe.UpdateOperation.set_payload(list(points), payload))

    def create_payload_index(
        self, collection: str, field: str, schema: Any, wait: bool = True
    ) -> None:
        kind = getattr(qe.PayloadSchemaType, _name(schema).capitalize())
        self._shard(collection).update(qe.UpdateOperation.create_field_index(field, kind))

    def scroll(
        self, collection: str, limit: int = 10, with_vectors: bool = False
    ) -> tuple[list[Any], Any]:
        return self._shard(collection).scroll(
            qe.ScrollRequest(limit=limit, with_payload=True, with_vector=with_vectors)
        )

    def close(self) -> None:
        for shard in self._open.values():
            shard.flush()
            shard.close()
        self._open.clear()


def _name(value: Any) -> str:
    return str(getattr(value, "value", value))


def _edge_distance(metric: Metric) -> qe.Distance:
    return {"cosine": qe.Distance.Cosine, "dot": qe.Distance.Dot, "l2": qe.Distance.Euclid}[metric]


def _point(p: Any) -> ShardPoint:
    vectors: dict[str, Any] = {}
    raw = p.vector if isinstance(p.vector, dict) else {"": p.vector}
    for name, v in raw.items():
        if isinstance(v, SparseVector | qe.SparseVector) or hasattr(v, "indices"):
            vectors[name] = SparseVector(indices=tuple(v.indices), values=tuple(v.values))
        else:
            vectors[name] = [float(x) for x in v]
    return ShardPoint(id=p.id, vectors=vectors, payload=dict(p.payload or {}))
