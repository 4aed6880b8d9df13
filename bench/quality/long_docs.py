"""Long documents and their chunks, built deterministically from a BEIR corpus (SciFact).

- *long*: the abstracts grouped into documents of :data:`DOC_SIZE` by nearest MiniLM
  neighbours (the first unassigned abstract in corpus order and its 7 nearest
  unassigned neighbours, ties broken by corpus order), each abstract a section
  (its title, a newline, its text) and sections separated by a blank line; the
  document's vector is the normalised mean of its sections' vectors;
- *chunked*: the same sections as separate records, ``group`` their document;
- *whole*: the long documents, recalled without passages (each hit's whole content);
- *nested*: the long documents, each section also kept as a ``nested`` passage
  (``sections``: its text, its start in the document, its own MiniLM vector: the
  abstract's), for ``search.nested_passages`` on Elasticsearch/OpenSearch.

A relevant section is a relevant abstract; a relevant document the one holding it.
Loaded into Elasticsearch/OpenSearch (bulk) and qdrant-edge (a shard on disk) with
the fields the gateway store maps: ``text``/``content``, ``key``, ``group``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tests.support.scifact import SciFact

DOC_SIZE = 8
"""Abstracts per long document."""
CREATED_AT = "2024-01-01T00:00:00Z"
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Record:
    """One indexed record of a shape."""

    id: int
    text: str
    group: str
    vector: npt.NDArray[np.float32]


@dataclass(frozen=True)
class Section:
    """One section of a long document as a nested passage."""

    text: str
    start: int
    vector: npt.NDArray[np.float32]


@dataclass(frozen=True)
class Shapes:
    """The long documents and the chunks, from one corpus."""

    documents: list[list[str]]
    """Per document, its abstracts' corpus ids in section order."""
    sections: dict[str, str]
    """Abstract id -> its section text (title, newline, abstract)."""
    long: list[Record]
    chunked: list[Record]
    doc_of: dict[str, int]
    """Abstract id -> its document."""
    nested: list[list[Section]]
    """Per document, its sections as nested passages (the *nested* shape)."""


def normalise(text: str) -> str:
    """Whitespace runs as one space, ends stripped: how evidence is compared."""
    return _SPACE.sub(" ", text).strip()


def group_documents(vectors: npt.NDArray[np.float32], size: int = DOC_SIZE) -> list[list[int]]:
    """Rows grouped by nearest neighbours: each group the first free row and its size-1 nearest
    free rows (by dot product of unit vectors; ties: the earlier row)."""
    n = len(vectors)
    free = np.ones(n, dtype=bool)
    groups: list[list[int]] = []
    order = np.arange(n)
    for seed in range(n):
        if not free[seed]:
            continue
        free[seed] = False
        sims = vectors @ vectors[seed]
        candidates = order[free]
        ranked = candidates[np.lexsort((candidates, -sims[candidates]))][: size - 1]
        free[ranked] = False
        groups.append([seed, *(int(r) for r in ranked)])
    return groups


def build(sf: SciFact, size: int = DOC_SIZE) -> Shapes:
    """The shapes of ``sf``'s corpus (vectors in ``sf.corpus_ids`` order)."""
    vectors = np.asarray(sf.corpus_vectors, dtype=np.float32)
    sections = {d: f"{sf.titles[d]}\n{sf.texts[d]}" for d in sf.corpus_ids}
    documents: list[list[str]] = []
    long: list[Record] = []
    chunked: list[Record] = []
    doc_of: dict[str, int] = {}
    nested: list[list[Section]] = []
    for number, rows in enumerate(group_documents(vectors, size)):
        ids = [sf.corpus_ids[r] for r in rows]
        documents.append(ids)
        mean = vectors[rows].mean(axis=0)
        mean /= np.linalg.norm(mean) or 1.0
        group = f"doc{number}"
        long.append(Record(number, "\n\n".join(sections[d] for d in ids), group, mean))
        parts: list[Section] = []
        start = 0
        for d, r in zip(ids, rows, strict=True):
            doc_of[d] = number
            chunked.append(Record(int(d), sections[d], group, vectors[r]))
            parts.append(Section(sections[d], start, vectors[r]))
            start += len(sections[d]) + 2
        nested.append(parts)
    return Shapes(documents, sections, long, chunked, doc_of, nested)


# ---- loading


def lucene_index_body(engine: str, analyzer: str, nested: bool = False) -> dict[str, Any]:
    """The SciFact index body; with ``nested``, a ``sections`` nested field of passages
    (text, start, a vector field like the document's)."""
    from tests.support.lucene_loader import index_body

    body = index_body(engine, analyzer)  # type: ignore[arg-type]
    if nested:
        props = body["mappings"]["properties"]
        props["sections"] = {
            "type": "nested",
            "properties": {
                "text": {"type": "text", "analyzer": analyzer},
                "start": {"type": "integer"},
                "vector": dict(props["embedding"]),
            },
        }
    return body


def _sources(records: list[Record], nested: list[list[Section]] | None) -> Iterator[dict[str, Any]]:
    for r in records:
        source = {
            "doc_id": str(r.id),
            "key": f"long/{r.id}",
            "title": "",
            "text": r.text,
            "group": r.group,
            "created_at": CREATED_AT,
            "acl": "even",
            "embedding": r.vector.astype(np.float32).tolist(),
        }
        if nested is not None:
            source["sections"] = [
                {"text": p.text, "start": p.start, "vector": p.vector.astype(np.float32).tolist()}
                for p in nested[r.id]
            ]
        yield source


def load_lucene(
    engine: str,
    url: str,
    index: str,
    records: list[Record],
    analyzer: str,
    nested: list[list[Section]] | None = None,
) -> float:
    """(Re)create ``index`` with the records (and their ``nested`` sections); seconds taken.

    Raises:
        RuntimeError: the bulk load failed or the count is wrong.
    """
    from tests.support.lucene_loader import lucene_client

    started = time.monotonic()
    client = lucene_client(engine, url)
    try:
        if client.indices.exists(index=index):
            if int(client.count(index=index)["count"]) == len(records):
                return time.monotonic() - started
            client.indices.delete(index=index)
        body = lucene_index_body(engine, analyzer, nested is not None)
        client.indices.create(index=index, body=body)
        if engine == "elasticsearch":
            from elasticsearch.helpers import bulk
        else:
            from opensearchpy.helpers import bulk
        actions = (
            {"_op_type": "index", "_index": index, "_id": s["doc_id"], "_source": s}
            for s in _sources(records, nested)
        )
        _, failed = bulk(client, actions, chunk_size=200, raise_on_error=False)
        if failed:
            raise RuntimeError(f"bulk load of {index}: {failed!r:.300}")
        client.indices.put_settings(index=index, body={"index": {"refresh_interval": None}})
        client.indices.refresh(index=index)
        if int(client.count(index=index)["count"]) != len(records):
            raise RuntimeError(f"{index} does not hold {len(records)} records")
    finally:
        client.close()
    return time.monotonic() - started


def load_qdrant(path: Path, collection: str, records: list[Record]) -> float:
    """A qdrant-edge shard of the records at ``path``/``collection``; seconds taken."""
    from connectors.qdrant.shard import ShardPoint, create_shard, shard_dir, write_points
    from connectors.qdrant.sparse import LexicalSparseEncoder
    from tests.support.scifact import DENSE, SPARSE

    started = time.monotonic()
    encoder = LexicalSparseEncoder(
        avgdl=LexicalSparseEncoder.average_length(r.text for r in records)
    )
    points = [
        ShardPoint(
            id=r.id,
            vectors={DENSE: r.vector.tolist(), SPARSE: encoder.encode_document(r.text)},
            payload={
                "content": r.text,
                "key": f"long/{r.id}",
                "group": r.group,
                "created_at": CREATED_AT,
            },
        )
        for r in records
    ]
    shard = create_shard(
        shard_dir(str(path), collection),
        dense={DENSE: (int(records[0].vector.shape[0]), "cosine")},
        sparse_idf=[SPARSE],
        indexes={"group": "keyword", "key": "keyword"},
    )
    try:
        write_points(shard, points)
    finally:
        shard.close()
    return time.monotonic() - started
