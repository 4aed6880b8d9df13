"""The offline fusion study ranks exactly as the gateway fuses (unit: no engine)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench.quality import fusion_study
from connectors.base import Fusion, Hit
from connectors.fusion import fuse


def _legs(seed: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(40)]
    lexical = sorted(((d, rng.uniform(1, 30)) for d in rng.sample(docs, 25)), key=lambda t: -t[1])
    dense = sorted(((d, rng.uniform(0.6, 0.9)) for d in rng.sample(docs, 25)), key=lambda t: -t[1])
    return lexical, dense


@pytest.mark.parametrize("fusion", ["zscore", "minmax", "dbsf"])
def test_the_studys_score_fusion_is_the_gateways(fusion: Fusion) -> None:
    for seed in range(5):
        lexical, dense = _legs(seed)
        study = fusion_study.method(f"{fusion}:0.5")(lexical, dense)[:10]
        hits = [([Hit(id=d, source={}, score=s) for d, s in leg], 1.0) for leg in (lexical, dense)]
        gateway = [h.id for h in fuse(hits, fusion=fusion, k=60, limit=10)]
        assert study == gateway


def test_the_studys_rrf_is_the_gateways() -> None:
    lexical, dense = _legs(7)
    study = fusion_study.method("rrf:60:0.5")(lexical, dense)[:10]
    hits = [([Hit(id=d, source={}, score=s) for d, s in leg], 1.0) for leg in (lexical, dense)]
    assert study == [h.id for h in fuse(hits, fusion="rrf", k=60, limit=10)]


def test_compare_prints_a_paired_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lexical, dense = _legs(3)
    legs = {"bm25": {"q1": lexical, "q2": lexical}, "dense": {"q1": dense, "q2": dense}}
    qrels = {"q1": {lexical[0][0]: 1}, "q2": {dense[0][0]: 1}}
    path = tmp_path / "legs.json"
    path.write_text(json.dumps({"qrels": qrels, "engines": {"opensearch": legs}}))
    assert fusion_study.main([str(path), "--compare", "rrf:60:0.5", "zscore:0.5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["opensearch", "opensearch"]
    assert all("B-A" in line and "[" in line for line in out)
