"""The int8 MiniLM export rewritten to keep its weights int8: what is rewritten, that the
session runs it to the original's vectors, and that anything else passes unchanged."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from gateway.embedders.int8_graph import keep_int8
from gateway.embedders.minilm import INT8_PACKAGE, OnnxMiniLM, available_weights

TEXTS = [
    "how do I keep passwords out of the config file?",
    "0-dimensional biomaterials show inductive properties.",
    "A deficiency of vitamin B12 increases blood levels of homocysteine.",
    "fetch a record by key",
]

needs_int8 = pytest.mark.skipif(
    "int8" not in available_weights(), reason="the minilm extra is not installed"
)


def _export() -> bytes:
    return Path(str(importlib.import_module(INT8_PACKAGE).model_path())).read_bytes()


@needs_int8
def test_the_export_is_rewritten_and_a_second_pass_changes_nothing() -> None:
    original = _export()
    model, rewritten = keep_int8(original)
    assert rewritten == 1 + 6 * 6  # the word-embedding Gather; six MatMuls in each layer
    assert b"MatMulNBits" in model
    assert b"MatMulNBits" not in original
    again, count = keep_int8(model)
    assert (again, count) == (model, 0)


@needs_int8
def test_the_rewritten_session_encodes_as_the_original_does() -> None:
    import onnxruntime as ort

    rewritten = OnnxMiniLM()
    original = OnnxMiniLM()
    original._session = ort.InferenceSession(_export(), providers=["CPUExecutionProvider"])
    got, want = rewritten.encode(TEXTS), original.encode(TEXTS)
    cosines = (got * want).sum(axis=1)
    assert float(cosines.min()) >= 0.999
    assert not np.array_equal(got, want)  # the control: it is the rewritten graph that ran


def test_bytes_that_are_not_the_export_pass_unchanged_or_are_refused() -> None:
    assert keep_int8(b"") == (b"", 0)
    no_graph = bytes([0x08, 0x07])  # ir_version 7, nothing else
    assert keep_int8(no_graph) == (no_graph, 0)
    with pytest.raises(ValueError, match="not a protobuf message"):
        keep_int8(bytes([0x3A, 0x40, 0x01]))  # a graph field longer than the bytes


@needs_int8
def test_the_rewrite_is_cached_once_per_machine_and_a_damaged_copy_is_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gateway.embedders.minilm as minilm

    monkeypatch.setenv("A2M_CACHE_DIR", str(tmp_path))
    texts = ["what do the harbour cranes lift?"]
    first = OnnxMiniLM().encode(texts)
    cached = list(tmp_path.glob("minilm-*.onnx"))
    assert len(cached) == 1
    assert not list(tmp_path.glob("*.tmp"))  # written through a rename, nothing left over

    def no_rewrite(model: bytes) -> tuple[bytes, int]:
        raise AssertionError("the cached rewrite should have been read")

    monkeypatch.setattr(minilm, "keep_int8", no_rewrite)
    assert np.array_equal(OnnxMiniLM().encode(texts), first)

    cached[0].write_bytes(b"not a model")  # a damaged cache file is rewritten, not fatal
    monkeypatch.setattr(minilm, "keep_int8", keep_int8)
    assert np.array_equal(OnnxMiniLM().encode(texts), first)
    assert cached[0].stat().st_size > 1_000_000
