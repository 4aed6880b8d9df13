"""A BEIR-layout collection (corpus, one split's queries and qrels) and its dense vectors.

Any BEIR split reads the same way: ``corpus.jsonl`` (``_id``, ``title``,
``text``), a queries JSONL (``_id``, ``text``) and a qrels TSV (``query-id``,
``corpus-id``, ``score``, with a header line).

Vectors are all-MiniLM-L6-v2 embeddings, unit length. They are read from the
on-disk cache beside each file, named after it: ``corpus.jsonl`` ->
``corpus-minilm.npy`` with ``corpus-ids.txt`` giving the row order (the
layout of the shared SciFact copy), or from ``~/.cache/a2m-bench/vectors``.
When neither exists they are computed in NumPy
(:class:`gateway.embedders.minilm.NumpyMiniLM`) and cached there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tests.support.scifact import SciFact

SCIFACT = Path(
    os.environ.get(
        "A2M_SCIFACT_DIR", Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact"
    )
)
"""The shared SciFact copy, every benchmark's default collection (``A2M_SCIFACT_DIR``)."""
VECTOR_SUFFIX = "minilm"
DIMENSIONS = 384


def cache_dir() -> Path:
    return Path(os.environ.get("A2M_BENCH_CACHE", Path.home() / ".cache" / "a2m-bench"))


@dataclass(frozen=True)
class Split:
    """The collection plus one split, evaluated on its judged queries."""

    sf: SciFact
    """Corpus, queries, vectors, in the shape the engine loaders of tests.support take."""
    qrels: dict[str, dict[str, int]]
    """query id -> corpus id -> graded relevance, as in the qrels file."""
    query_ids: list[str]
    """Judged queries that have text, in file order: the ones evaluated."""
    corpus_path: Path
    vectors_note: str

    def fingerprint(self) -> str:
        """Short, stable id of the corpus (engine index names carry it)."""
        return file_digest(self.corpus_path)[:10]


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_jsonl(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """A BEIR qrels TSV (header line, then query-id, corpus-id, score)."""
    out: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # header
            if len(parts) < 3:
                continue
            qid, did, score = parts[0], parts[1], int(parts[2])
            out.setdefault(qid, {})[did] = score
    return out


def _beside(path: Path) -> tuple[Path, Path]:
    stem = path.name.removesuffix(".jsonl")
    return path.with_name(f"{stem}-{VECTOR_SUFFIX}.npy"), path.with_name(f"{stem}-ids.txt")


def _cached(path: Path) -> tuple[Path, Path]:
    key = file_digest(path)[:16]
    base = cache_dir() / "vectors"
    return base / f"{key}-{VECTOR_SUFFIX}.npy", base / f"{key}-ids.txt"


def vectors_for(
    path: Path, ids: list[str], texts: list[str], *, compute: bool
) -> tuple[npt.NDArray[np.float32], list[str], str]:
    """The vectors of a JSONL file's items, from the cache, else computed (when allowed).

    Returns (matrix, row ids, where they came from).

    Raises:
        FileNotFoundError: no cached vectors and computing them is off or impossible.
    """
    for npy, id_file in (_beside(path), _cached(path)):
        if npy.is_file() and id_file.is_file():
            rows = id_file.read_text(encoding="utf-8").split()
            matrix = np.load(npy, mmap_mode="r")
            if matrix.shape != (len(rows), DIMENSIONS):
                raise ValueError(f"{npy} is {matrix.shape}, expected ({len(rows)}, {DIMENSIONS})")
            missing = set(ids) - set(rows)
            if missing:
                raise ValueError(f"{npy} lacks {len(missing)} ids of {path.name}")
            return matrix, rows, str(npy)
    if not compute:
        raise FileNotFoundError(
            f"no all-MiniLM-L6-v2 vectors for {path} (looked for {_beside(path)[0].name} beside "
            f"it and in {cache_dir() / 'vectors'}); rerun with --embed to compute them"
        )
    from gateway.embedders.minilm import NumpyMiniLM

    npy, id_file = _cached(path)
    npy.parent.mkdir(parents=True, exist_ok=True)
    matrix = NumpyMiniLM().encode(texts)
    np.save(npy, matrix)
    id_file.write_text("\n".join(ids) + "\n", encoding="utf-8")
    return matrix, ids, f"{npy} (computed)"


@dataclass(frozen=True)
class Vectors:
    """A split's dense vectors: the corpus's and the queries', each row's id, and their source."""

    corpus: npt.NDArray[np.float32]
    corpus_rows: list[str]
    queries: npt.NDArray[np.float32]
    query_rows: list[str]
    note: str


def read_vectors(
    corpus: Path,
    doc_ids: list[str],
    doc_texts: list[str],
    queries: Path,
    query_rows: list[dict[str, str]],
    *,
    compute: bool,
) -> Vectors:
    """The vectors of the corpus and of the queries file (see :func:`vectors_for`)."""
    cmat, crows, cnote = vectors_for(corpus, doc_ids, doc_texts, compute=compute)
    qmat, qrows, qnote = vectors_for(
        queries,
        [q["_id"] for q in query_rows],
        [q["text"] for q in query_rows],
        compute=compute,
    )
    return Vectors(cmat, crows, qmat, qrows, f"corpus: {cnote}; queries: {qnote}")


def no_vectors(doc_ids: list[str], query_ids: list[str]) -> Vectors:
    """Zero vectors, for a lexical run on a corpus nobody embedded."""
    return Vectors(
        np.zeros((len(doc_ids), DIMENSIONS), dtype=np.float32),
        doc_ids,
        np.zeros((len(query_ids), DIMENSIONS), dtype=np.float32),
        query_ids,
        "none (lexical only)",
    )


def load_split(
    corpus: Path,
    queries: Path,
    qrels: Path,
    *,
    limit_queries: int | None = None,
    need_vectors: bool = True,
    compute_vectors: bool = False,
) -> Split:
    """Read a BEIR split and its vectors.

    ``need_vectors=False`` (BM25 only) skips the vectors and fills zeros, so a
    lexical run works on a corpus nobody embedded.

    Raises:
        FileNotFoundError, ValueError: files missing or inconsistent.
    """
    docs = read_jsonl(corpus)
    titles = {d["_id"]: d.get("title") or "" for d in docs}
    texts = {d["_id"]: d.get("text") or "" for d in docs}
    doc_ids = [d["_id"] for d in docs]
    query_rows = read_jsonl(queries)
    query_text = {q["_id"]: q["text"] for q in query_rows}
    judged = read_qrels(qrels)
    qids = [q["_id"] for q in query_rows if q["_id"] in judged]
    if limit_queries is not None:
        qids = qids[:limit_queries]
    if not qids:
        raise ValueError(f"no query of {queries.name} has a judgement in {qrels.name}")

    if need_vectors:
        # What the shared vectors were computed from: title, a space, the abstract.
        doc_texts = [f"{titles[d]} {texts[d]}" for d in doc_ids]
        vectors = read_vectors(
            corpus, doc_ids, doc_texts, queries, query_rows, compute=compute_vectors
        )
    else:
        vectors = no_vectors(doc_ids, [q["_id"] for q in query_rows])

    relevant = {q: {d for d, s in rel.items() if s > 0} for q, rel in judged.items()}
    sf = SciFact(
        titles=titles,
        texts=texts,
        corpus_ids=vectors.corpus_rows,
        queries=query_text,
        query_ids=vectors.query_rows,
        qrels=relevant,
        corpus_vectors=vectors.corpus,
        query_vectors=vectors.queries,
        _doc_row={d: i for i, d in enumerate(vectors.corpus_rows)},
        _query_row={q: i for i, q in enumerate(vectors.query_rows)},
    )
    return Split(sf=sf, qrels=judged, query_ids=qids, corpus_path=corpus, vectors_note=vectors.note)


def restrict(split: Split, others: int) -> Split:
    """The judged documents of the evaluated queries plus ``others`` unjudged ones."""
    sf = split.sf
    keep = {d for q in split.query_ids for d in split.qrels[q] if d in sf._doc_row}
    extra = [d for d in sf.corpus_ids if d not in keep][:others]
    return subset_split(split, [d for d in sf.corpus_ids if d in keep] + extra)


def subset_split(split: Split, ids: Sequence[str]) -> Split:
    """The split with only these documents (their vectors kept), queries unchanged."""
    sf = split.sf
    rows = [sf._doc_row[d] for d in ids]
    vectors = np.asarray(sf.corpus_vectors)[rows]
    new_sf = type(sf)(
        titles=sf.titles,
        texts=sf.texts,
        corpus_ids=list(ids),
        queries=sf.queries,
        query_ids=sf.query_ids,
        qrels=sf.qrels,
        corpus_vectors=vectors,
        query_vectors=sf.query_vectors,
        _doc_row={d: i for i, d in enumerate(ids)},
        _query_row=sf._query_row,
    )
    return Split(new_sf, split.qrels, split.query_ids, split.corpus_path, split.vectors_note)
