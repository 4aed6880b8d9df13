"""The long-document benchmark's building blocks: grouping, evidence, document nDCG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.quality.long_docs import build, group_documents
from bench.quality.long_run import doc_ndcg, has_evidence, runs_of


def test_groups_are_the_first_free_row_and_its_nearest_free_rows() -> None:
    # Two clusters, interleaved in row order: each group is one cluster.
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    rows = [a, b, a * 0.9 + b * 0.1, b * 0.9 + a * 0.1, a, b]
    vectors = np.array([r / np.linalg.norm(r) for r in rows], dtype=np.float32)
    assert group_documents(vectors, 3) == [[0, 4, 2], [1, 5, 3]]
    assert group_documents(vectors, 3) == group_documents(vectors.copy(), 3)


def test_evidence_is_a_shared_run_of_80_characters_whitespace_normalised() -> None:
    abstract = "Vitamin D deficiency raises the risk of fractures in elderly women, " * 3
    runs = [runs_of(abstract)]
    spaced = abstract[:90].replace(" ", "  \n ")
    assert has_evidence("prefix " + spaced + " suffix", runs)
    assert not has_evidence(abstract[:79], runs)
    assert not has_evidence("unrelated text " * 20, runs)


def test_document_ndcg() -> None:
    assert doc_ndcg([3, 1, 2], {3: 1}) == 1.0
    assert doc_ndcg([1, 3], {3: 1}) == pytest.approx(1 / np.log2(3))
    assert doc_ndcg([1, 2], {}) == 0.0


def test_the_shapes_hold_every_abstract_once(scifact_dir: Path) -> None:
    from tests.support.scifact import load_scifact

    sf = load_scifact(scifact_dir)
    shapes = build(sf)
    assert sorted(d for doc in shapes.documents for d in doc) == sorted(sf.corpus_ids)
    assert len(shapes.chunked) == len(sf.corpus_ids)
    assert all(len(doc) == 8 for doc in shapes.documents[:-1])
    first = shapes.long[0]
    assert first.text.split("\n\n")[0] == shapes.sections[shapes.documents[0][0]]
    assert {r.group for r in shapes.chunked if shapes.doc_of[str(r.id)] == 0} == {first.group}
    # Nested passages: each section at its start in the document, with its abstract's vector.
    for record, parts in zip(shapes.long[:20], shapes.nested[:20], strict=False):
        assert [p.text for p in parts] == record.text.split("\n\n")
        assert all(record.text[p.start : p.start + len(p.text)] == p.text for p in parts)
    row = sf.corpus_ids.index(shapes.documents[0][1])
    assert np.array_equal(shapes.nested[0][1].vector, sf.corpus_vectors[row])


@pytest.mark.integration
def test_the_shapes_run_through_the_gateway_on_qdrant(tmp_path: Path, scifact_dir: Path) -> None:
    from tests.bench.test_smoke import _run

    report, table = _run(
        [
            "bench.quality",
            "--shape",
            "long",
            "chunked",
            "whole",
            "--engines",
            "qdrant",
            "--modes",
            "hybrid",
            "--limit-queries",
            "8",
        ],
        tmp_path / "long.json",
        scifact_dir,
    )
    cells = report["qdrant"]["hybrid"]
    assert set(cells) == {"long", "chunked", "whole"}
    assert set(cells["chunked"]) == {
        "none",
        "per_group=1",
        "per_group=1 unfolded",
        "passages",
        "passages per_group=1",
        "passages no-rank",
    }
    passages, whole = cells["long"]["passages"], cells["whole"]["none"]
    unranked = cells["long"]["passages no-rank"]
    assert set(cells["long"]) == {"passages", "passages no-rank"}  # no highlighter: no by-gateway
    assert unranked["max_record_chars"] <= 600
    for cell in (passages, unranked, whole, *cells["chunked"].values()):
        assert cell["queries"] == 8
        assert cell["errors"] == 0
        assert 0.0 <= cell["evidence_at_k"] <= 1.0
    assert passages["max_record_chars"] <= 600 < whole["max_record_chars"]
    # Without the rank, the same documents in the same order: passages change contents.
    assert unranked["doc_ndcg10"] == whole["doc_ndcg10"]
    assert whole["evidence_at_k"] > 0  # relevant abstracts are found at all
    # The cap keeps one record a document, folded or not: the same documents, in order.
    chunked = cells["chunked"]
    assert chunked["per_group=1"]["doc_ndcg10"] == chunked["per_group=1 unfolded"]["doc_ndcg10"]
    assert chunked["passages per_group=1"]["max_record_chars"] <= 600
    # Chunks of one section each: the rank leaves the page in the engine's order.
    for measure in ("doc_ndcg10", "evidence_at_k", "chars_per_query"):
        assert chunked["passages"][measure] == chunked["passages no-rank"][measure]
    assert table.count("| qdrant | hybrid |") == 9


@pytest.mark.integration
def test_the_nested_shape_runs_through_the_gateway_on_elasticsearch_9(
    tmp_path: Path, scifact_dir: Path
) -> None:
    import os

    from tests.bench.test_smoke import _run
    from tests.conftest import missing

    url = os.environ.get("A2M_TEST_ELASTICSEARCH9_URL")
    if not url:
        missing("A2M_TEST_ELASTICSEARCH9_URL not set (python tests/engines/engines.py start)")
    assert url
    report, table = _run(
        [
            "bench.quality",
            "--shape",
            "nested",
            "whole",
            "--engines",
            "elasticsearch",
            "--elasticsearch-url",
            url,
            "--modes",
            "hybrid",
            "--limit-queries",
            "8",
        ],
        tmp_path / "nested.json",
        scifact_dir,
    )
    cells = report["elasticsearch"]["hybrid"]
    assert set(cells) == {"nested", "whole"}
    assert set(cells["nested"]) == {"none", "passages", "passages rank"}
    passages, plain = cells["nested"]["passages"], cells["nested"]["none"]
    ranked = cells["nested"]["passages rank"]
    for cell in (passages, ranked, plain, cells["whole"]["none"]):
        assert cell["queries"] == 8
        assert cell["errors"] == 0
    assert passages["max_record_chars"] <= 600 < plain["max_record_chars"]
    # No rank by default here: passages change contents, not the nested kNN leg's ranking.
    assert passages["doc_ndcg10"] == plain["doc_ndcg10"]
    assert table.count("| elasticsearch | hybrid |") == 4
