"""The lexical sparse encoder of Qdrant's lexical leg: terms, stems, weights, stability."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from connectors.qdrant.sparse import LexicalSparseEncoder, stem, stem_english, term_index


def test_lexical_terms_stopwords_and_stems() -> None:
    enc = LexicalSparseEncoder()
    assert enc.terms("The mutations were NOT in the genes; mutated gene!") == [
        "mutat",
        "not",
        "gene",
        "mutat",
        "gene",
    ]
    assert stem("studies") == stem("studied") == stem("studying") == "study"
    assert stem("p53") == "p53"
    assert enc.terms("Übersetzung café_crème 42") == ["übersetzung", "café", "crèm", "42"]


def test_the_english_analyzer_conflates_spellings_and_derivations() -> None:
    same = [
        ("normalise", "normalize", "normalised", "normalisation", "normalization"),
        ("behaviour", "behavior"),
        ("analyse", "analyzed"),
        ("configure", "configured", "configuration"),
        ("embed", "embedded", "embedders", "embedding"),
        ("activate", "activated", "activating", "activation"),
        ("validate", "validation"),
    ]
    for words in same:
        assert len({stem_english(w) for w in words}) == 1, words
    # Words whose -ed or -er is their own stay apart from their would-be stems.
    assert stem_english("speed") == "speed"
    assert stem_english("server") != stem_english("serve")
    assert stem_english("added") == "add"
    # The default analyzer is unchanged: collections indexed with it still match.
    assert stem("normalise") != stem("normalize")
    assert LexicalSparseEncoder().terms("normalised scores") == ["normalis", "scor"]
    english = LexicalSparseEncoder(analyzer="english")
    assert english.encode_query("normalise") == english.encode_query("normalization")
    assert english.encode_query("normalise") != LexicalSparseEncoder().encode_query("normalise")


def test_lexical_query_weights_and_empty_query() -> None:
    enc = LexicalSparseEncoder()
    q = enc.encode_query("gene gene mutation")
    assert sorted(q.indices) == list(q.indices)
    assert set(q.indices) == {term_index("gene"), term_index("mutat")}
    assert q.values == (1.0, 1.0)
    assert enc.encode_query("the of and").indices == ()


def test_lexical_document_weights_are_bm25_saturation() -> None:
    enc = LexicalSparseEncoder(k1=1.2, b=0.75, avgdl=4.0)
    d = enc.encode_document("gene gene mutation cell")  # 4 terms, dl == avgdl
    weights = dict(zip(d.indices, d.values, strict=True))
    assert weights[term_index("gene")] == pytest.approx(2 * 2.2 / (2 + 1.2))
    assert weights[term_index("cell")] == pytest.approx(1.0)
    longer = enc.encode_document("gene " + "filler " * 12)
    short_w = dict(zip(longer.indices, longer.values, strict=True))[term_index("gene")]
    assert short_w < 1.0  # a longer document weighs one occurrence less
    with pytest.raises(ValueError, match="avgdl"):
        LexicalSparseEncoder(avgdl=0)


def test_lexical_encoding_is_stable_across_processes() -> None:
    text = "Vitamin D deficiency increases the risk of fractures"
    here = LexicalSparseEncoder().encode_document(text)
    code = (
        "from connectors.qdrant.sparse import LexicalSparseEncoder as E;"
        f"v = E().encode_document({text!r}); print(list(v.indices), list(v.values))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip() == f"{list(here.indices)} {list(here.values)}"


def test_lexical_average_length() -> None:
    assert LexicalSparseEncoder.average_length(["gene cell", "the mutation"]) == 1.5
    assert LexicalSparseEncoder.average_length([]) == 1.0
