"""Rewritten forms of the int8 MiniLM export, for ``bench.minilm_memory`` (needs ``onnx``).

The export stores each weight as int8 with a per-row (embeddings) or per-column
(MatMul) fp32 scale, dequantized by ``Cast`` then ``Mul``. :func:`rewrite` keeps
those int8 values: the word-embedding ``Gather`` moves before its Cast/Mul (exact),
and with ``nbits`` every weight MatMul becomes ``MatMulNBits`` (8 bits, block 32, the
per-column scale repeated per block, zero point 128) at that accuracy level.
:func:`dynamic` is onnxruntime's ``quantize_dynamic`` of the constant-folded graph.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_WORDS = "inner.embeddings.word_embeddings.weight"


def _dequantized(by_output: dict[str, Any], inits: dict[str, Any], name: str) -> Any:
    """(cast, mul, int8 initializer, scale initializer) when name is Mul(Cast(int8), scale)."""
    mul = by_output.get(name)
    if mul is None or mul.op_type != "Mul":
        return None
    cast = by_output.get(mul.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits:
        return None
    return cast, mul, cast.input[0], mul.input[1]


def _nbits_node(n: Any, q: Any, scale: Any, level: int, added: list[Any]) -> Any:
    import numpy as np
    from onnx import helper, numpy_helper

    wq = numpy_helper.to_array(q)
    k, cols = wq.shape
    block = 32 if k % 32 == 0 else k
    blob = (wq.T.astype(np.int16) + 128).astype(np.uint8).reshape(cols, k // block, block)
    scales = np.repeat(numpy_helper.to_array(scale).reshape(cols), k // block)
    added += [
        numpy_helper.from_array(blob, q.name + "_nbits"),
        numpy_helper.from_array(scales.astype(np.float32), q.name + "_nbits_scale"),
    ]
    return helper.make_node(
        "MatMulNBits",
        [n.input[0], q.name + "_nbits", q.name + "_nbits_scale"],
        [n.output[0]],
        domain="com.microsoft",
        K=k,
        N=cols,
        bits=8,
        block_size=block,
        accuracy_level=level,
    )


def rewrite(src: str, dst: Path, *, nbits: int | None) -> Path:
    """The export with the embeddings gathered as int8 (and MatMulNBits when nbits is set)."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(src)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    by_output = {o: n for n in graph.node for o in n.output}
    replaced: dict[int, list[Any]] = {}
    dropped: set[int] = set()
    added: list[Any] = []
    for n in graph.node:
        chain = _dequantized(by_output, inits, n.input[1]) if len(n.input) > 1 else None
        if n.op_type == "Gather" and n.input[0] == _WORDS:
            cast, mul, q, scale = _dequantized(by_output, inits, _WORDS)
            replaced[id(n)] = [
                helper.make_node("Gather", [q, n.input[1]], ["words_q"], axis=0),
                helper.make_node("Gather", [scale, n.input[1]], ["words_scale"], axis=0),
                helper.make_node("Cast", ["words_q"], ["words_f"], to=TensorProto.FLOAT),
                helper.make_node("Mul", ["words_f", "words_scale"], [n.output[0]]),
            ]
            dropped |= {id(cast), id(mul)}
        elif nbits is not None and n.op_type == "MatMul" and chain is not None:
            cast, mul, q, scale = chain
            replaced[id(n)] = [_nbits_node(n, inits[q], inits[scale], nbits, added)]
            dropped |= {id(cast), id(mul)}
    nodes = []
    for n in graph.node:
        if id(n) in replaced:
            nodes += replaced[id(n)]
        elif id(n) not in dropped:
            nodes.append(n)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if nbits is not None:
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(dst))
    return dst


def dynamic(src: str, work: Path) -> Path:
    """onnxruntime's ``quantize_dynamic`` (per channel, int8 weights) of the folded graph."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folded = work / "folded.onnx"
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(folded)
    ort.InferenceSession(src, sess_options=opts, providers=["CPUExecutionProvider"])
    whole = work / "folded-whole.onnx"
    onnx.save(onnx.load(str(folded)), str(whole))
    dst = work / "dynamic.onnx"
    quantize_dynamic(
        str(whole),
        str(dst),
        per_channel=True,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Gather"],
    )
    return dst
