"""What the int8 MiniLM session costs in memory and time, per onnxruntime option or graph form.

Each variant runs in a fresh interpreter: import, build the session the way
``gateway.embedders.minilm.OnnxMiniLM`` does plus the variant's change, encode
100 queries one at a time (the demo's questions), and report the RSS the session
added when built, the RSS it and the queries added, the process's RSS at the end,
the encode p50, and how far its vectors are from the gateway's own encoder's
(min cosine, max |difference| over the same queries): the export as shipped, first,
is the reference.

Options are onnxruntime's public ``SessionOptions`` and session config entries.
Graph forms (only with ``onnx`` installed, ``pip install onnx``; the gateway never
imports it) rewrite the export's int8 weights, which it turns to fp32 with a
Cast and a Mul that onnxruntime's constant folding computes once at build:

* ``gather-first``: the word embeddings gathered as int8 rows, then Cast and Mul
  on those rows only (exact: the same arithmetic on the same values);
* ``nbits acc0`` / ``nbits acc4``: every weight MatMul as ``MatMulNBits`` (8 bits,
  the export's int8 values and per-column scales, exact weights) computing in fp32
  (accuracy level 0) or int8 (level 4: activations quantized per block); acc4 is
  what the gateway runs, rewritten by ``gateway.embedders.int8_graph.keep_int8``
  (no ``onnx`` needed for that row);
* ``dynamic``: onnxruntime's ``quantize_dynamic`` of the folded fp32 graph
  (MatMulInteger on uint8 activations, re-quantized weights).

    python -m bench.minilm_memory [--queries 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.machine import load_text

REPO = Path(__file__).resolve().parent.parent

VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("export as shipped (arena off, trim)", {}),
    ("no malloc_trim after build", {"trim": False}),
    ("enable_cpu_mem_arena=True", {"arena": True}),
    (
        "arena on, arena_extend_strategy kSameAsRequested",
        {"arena": True, "entries": {"arena_extend_strategy": "kSameAsRequested"}},
    ),
    ("enable_mem_pattern=False", {"mem_pattern": False}),
    ("session.disable_prepacking=1", {"entries": {"session.disable_prepacking": "1"}}),
    ("session.use_env_allocators=1", {"entries": {"session.use_env_allocators": "1"}}),
    ("session.disable_quant_qdq=1", {"entries": {"session.disable_quant_qdq": "1"}}),
    ("graph level BASIC", {"level": "ORT_ENABLE_BASIC"}),
    ("graph level EXTENDED", {"level": "ORT_ENABLE_EXTENDED"}),
    ("graph level DISABLE_ALL", {"level": "ORT_DISABLE_ALL"}),
    ("intra_op_num_threads=2", {"intra": 2}),
    ("graph: gather-first", {"graph": "gather-first"}),
    ("graph: gather-first + nbits acc0", {"graph": "nbits0"}),
    ("graph: gather-first + nbits acc4 (keep_int8, the gateway's)", {"graph": "keep_int8"}),
    ("graph: dynamic (quantize_dynamic)", {"graph": "dynamic"}),
]

_CHILD = r"""
import json, statistics, sys, time
cfg = json.loads(sys.argv[1])
from bench.machine import rss_mib
import os
start = rss_mib(os.getpid())
import numpy as np
import onnxruntime as ort
from gateway.embedders import minilm
imported = rss_mib(os.getpid())
opts = ort.SessionOptions()
opts.intra_op_num_threads = cfg.get("intra", 1)
opts.inter_op_num_threads = 1
opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
opts.log_severity_level = 3
opts.enable_cpu_mem_arena = cfg.get("arena", False)
opts.enable_mem_pattern = cfg.get("mem_pattern", True)
if "level" in cfg:
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, cfg["level"])
for key, value in cfg.get("entries", {}).items():
    opts.add_session_config_entry(key, value)
tok = minilm._tokenizer()
session = ort.InferenceSession(cfg["model"], sess_options=opts, providers=["CPUExecutionProvider"])
if cfg.get("trim", True):
    minilm.release_freed_heap()
built = rss_mib(os.getpid())
def encode(text):
    ids, mask = minilm._batch(tok, [text])
    feeds = {"input_ids": ids, "attention_mask": mask.astype(np.int64),
             "token_type_ids": np.zeros_like(ids)}
    return minilm._pool(session.run(["last_hidden_state"], feeds)[0], mask)[0]
encode("warm-up")
times, vectors = [], []
for q in cfg["queries"]:
    t = time.perf_counter()
    vectors.append(encode(q))
    times.append((time.perf_counter() - t) * 1000)
end = rss_mib(os.getpid())
np.save(cfg["out"], np.array(vectors))
print(json.dumps({"import": imported - start, "session": built - imported,
                  "session_queries": end - imported, "rss": end,
                  "p50": statistics.median(times)}))
"""


def graph_forms(src: str, out_dir: Path) -> dict[str, str]:
    """The rewritten models by form name; only the gateway's without the ``onnx`` package."""
    from gateway.embedders.int8_graph import keep_int8

    ours = out_dir / "keep_int8.onnx"
    ours.write_bytes(keep_int8(Path(src).read_bytes())[0])
    forms = {"keep_int8": ours}
    try:
        import onnx  # noqa: F401
    except ImportError:
        return {k: str(v) for k, v in forms.items()}
    from bench.minilm_graph import dynamic, rewrite

    forms["gather-first"] = rewrite(src, out_dir / "gather-first.onnx", nbits=None)
    forms["nbits0"] = rewrite(src, out_dir / "nbits0.onnx", nbits=0)
    forms["dynamic"] = dynamic(src, out_dir)
    return {k: str(v) for k, v in forms.items()}


def run_variant(cfg: dict[str, Any]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cfg)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=600,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    import importlib

    import numpy as np

    from bench.embedded_store import QUESTIONS
    from gateway.embedders.minilm import INT8_PACKAGE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    queries = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.queries)]
    src = str(importlib.import_module(INT8_PACKAGE).model_path())
    work = Path(tempfile.mkdtemp(prefix="a2m-minilm-memory-"))
    forms = graph_forms(src, work)
    print(f"load before: {load_text()}")
    print(
        "| variant | session RSS at build, MiB | session + 100 queries, MiB | process RSS, MiB "
        "| encode p50 ms | min cosine / max abs diff vs the export as shipped |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    reference: Any = None
    for name, variant in VARIANTS:
        graph = variant.get("graph")
        if graph is not None and graph not in forms:
            print(f"| {name} | (needs `pip install onnx`) | | | | |")
            continue
        model = forms[graph] if graph is not None else src
        out = work / f"v{len(name)}-{abs(hash(name))}.npy"
        r = run_variant({**variant, "model": model, "queries": queries, "out": str(out)})
        vectors = np.load(out)
        if reference is None:
            reference = vectors
        cos = float((vectors * reference).sum(axis=1).min())
        diff = float(np.abs(vectors - reference).max())
        print(
            f"| {name} | {r['session']:.0f} | {r['session_queries']:.0f} | {r['rss']:.0f} "
            f"| {r['p50']:.2f} | {cos:.6f} / {diff:.1e} |",
            flush=True,
        )
    print(f"load after: {load_text()}")


if __name__ == "__main__":
    main()
