"""The int8 MiniLM export rewritten so onnxruntime keeps its weights int8 in memory.

The export stores every weight as int8 with an fp32 scale and turns it to fp32 with
a ``Cast`` then a ``Mul``; onnxruntime's constant folding computes those fp32
weights once when the session is built: 47 MB for the word embeddings (of which a
query reads a few rows) and 42 MB for the MatMul weights. :func:`keep_int8`
rewrites the graph before the session is built:

* the word-embedding ``Gather`` reads the int8 rows and their scales, and only the
  rows read are turned to fp32 (the same arithmetic on the same values: exact);
* each weight ``MatMul`` becomes onnxruntime's ``MatMulNBits`` with 8 bits: the
  export's int8 values (offset by the zero point 128) and per-column scales, the
  activations quantized per block of 32 at accuracy level 4 (int8 arithmetic).

Pure bytes in, bytes out, on protobuf's wire format: ONNX's Python package is
not needed. A graph without the export's patterns comes back unchanged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final

import numpy as np

WORDS: Final = "inner.embeddings.word_embeddings.weight"
"""The export's word-embedding table (the Gather's data input)."""
BLOCK: Final = 32
"""MatMulNBits block size along K."""
ACCURACY: Final = 4
"""MatMulNBits accuracy level: activations quantized to int8 per block."""

# Field numbers of onnx.proto.
_MODEL_GRAPH, _MODEL_OPSET = 7, 8
_GRAPH_NODE, _GRAPH_INIT = 1, 5
_NODE_IN, _NODE_OUT, _NODE_OP, _NODE_ATTR, _NODE_DOMAIN = 1, 2, 4, 5, 7
_T_DIMS, _T_TYPE, _T_NAME, _T_RAW = 1, 2, 8, 9
_INT8, _UINT8, _FLOAT = 3, 2, 1
_LEN = 2

REWRITE_VERSION = 1
"""Bumped whenever :func:`keep_int8` changes what it writes: names the cached rewrite."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, bytes]]:
    """(field number, wire type, payload) for each field; a varint's payload is its bytes.

    Raises:
        ValueError: buf is not a protobuf message.
    """
    try:
        return _read_fields(buf)
    except IndexError as exc:
        raise ValueError("not a protobuf message: it ends inside a field") from exc


def _read_fields(buf: bytes) -> list[tuple[int, int, bytes]]:
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        start = pos
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == _LEN:
            size, start = _varint(buf, pos)
            pos = start + size
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise IndexError(pos)
        out.append((number, wire, buf[start:pos]))
    return out


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    key = _put_varint(number << 3 | wire)
    return key + (_put_varint(len(payload)) + payload if wire == _LEN else payload)


def _text(number: int, value: str) -> bytes:
    return _field(number, _LEN, value.encode())


def _int_attr(name: str, value: int) -> bytes:
    body = _text(1, name) + _field(3, 0, _put_varint(value)) + _field(20, 0, _put_varint(2))
    return _field(_NODE_ATTR, _LEN, body)


def _node(
    op: str, inputs: list[str], outputs: list[str], *, attrs: bytes = b"", domain: str = ""
) -> bytes:
    body = b"".join(_text(_NODE_IN, i) for i in inputs)
    body += b"".join(_text(_NODE_OUT, o) for o in outputs) + _text(_NODE_OP, op) + attrs
    if domain:
        body += _text(_NODE_DOMAIN, domain)
    return _field(_GRAPH_NODE, _LEN, body)


def _tensor(name: str, array: np.ndarray, data_type: int) -> bytes:
    body = b"".join(_field(_T_DIMS, 0, _put_varint(d)) for d in array.shape)
    body += _field(_T_TYPE, 0, _put_varint(data_type)) + _text(_T_NAME, name)
    body += _field(_T_RAW, _LEN, array.tobytes())
    return _field(_GRAPH_INIT, _LEN, body)


@dataclass
class _Node:
    raw: bytes
    op: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    attrs: bytes = b""


def _parse_node(payload: bytes) -> _Node:
    node = _Node(payload)
    for number, wire, value in _fields(payload):
        if number == _NODE_IN:
            node.inputs.append(value.decode())
        elif number == _NODE_OUT:
            node.outputs.append(value.decode())
        elif number == _NODE_OP:
            node.op = value.decode()
        elif number == _NODE_ATTR:
            node.attrs += _field(_NODE_ATTR, wire, value)
    return node


def _int8_matrix(payload: bytes) -> np.ndarray | None:
    """A 2-D int8 initializer held as raw data, else None."""
    dims: list[int] = []
    data_type, raw = 0, b""
    for number, _, value in _fields(payload):
        if number == _T_DIMS:
            dims.append(_varint(value, 0)[0])
        elif number == _T_TYPE:
            data_type = _varint(value, 0)[0]
        elif number == _T_RAW:
            raw = value
    if data_type != _INT8 or len(dims) != 2 or len(raw) != dims[0] * dims[1]:
        return None
    return np.frombuffer(raw, np.int8).reshape(dims)


def _float_vector(payload: bytes, size: int) -> np.ndarray | None:
    """An fp32 initializer of ``size`` values held as raw data, else None."""
    data_type, raw = 0, b""
    for number, _, value in _fields(payload):
        if number == _T_TYPE:
            data_type = _varint(value, 0)[0]
        elif number == _T_RAW:
            raw = value
    if data_type != _FLOAT or len(raw) != 4 * size:
        return None
    return np.frombuffer(raw, "<f4")


def _tensor_name(payload: bytes) -> str:
    return next((v.decode() for n, _, v in _fields(payload) if n == _T_NAME), "")


class _Rewrite:
    """One graph's nodes and initializers, and what replaces what."""

    def __init__(self, graph: bytes) -> None:
        self.fields = _fields(graph)
        self.nodes = [_parse_node(v) for n, _, v in self.fields if n == _GRAPH_NODE]
        self.inits = {_tensor_name(v): v for n, _, v in self.fields if n == _GRAPH_INIT}
        self.by_output = {o: node for node in self.nodes for o in node.outputs}
        self.uses = Counter(i for node in self.nodes for i in node.inputs)
        self.replaced: dict[int, bytes] = {}
        self.dropped: set[int] = set()
        self.added: list[bytes] = []

    def dequantized(self, name: str) -> tuple[_Node, _Node, str, str] | None:
        """(cast, mul, int8 initializer, scale) when name is Mul(Cast(int8), scale), used once."""
        mul = self.by_output.get(name)
        if mul is None or mul.op != "Mul" or len(mul.inputs) != 2 or self.uses[name] != 1:
            return None
        cast = self.by_output.get(mul.inputs[0])
        if cast is None or cast.op != "Cast" or cast.inputs[0] not in self.inits:
            return None
        if mul.inputs[1] not in self.inits or self.uses[mul.inputs[0]] != 1:
            return None
        return cast, mul, cast.inputs[0], mul.inputs[1]

    def gather_first(self, gather: _Node) -> bool:
        chain = self.dequantized(gather.inputs[0])
        if chain is None:
            return False
        cast, mul, q, scale = chain
        ids, out = gather.inputs[1], gather.outputs[0]
        self.replaced[id(gather)] = b"".join(
            [
                _node("Gather", [q, ids], [f"{out}_q"], attrs=gather.attrs),
                _node("Gather", [scale, ids], [f"{out}_scale"], attrs=gather.attrs),
                _node("Cast", [f"{out}_q"], [f"{out}_f"], attrs=cast.attrs),
                _node("Mul", [f"{out}_f", f"{out}_scale"], [out]),
            ]
        )
        self.dropped |= {id(cast), id(mul)}
        return True

    def nbits(self, matmul: _Node) -> bool:
        chain = self.dequantized(matmul.inputs[1])
        if chain is None:
            return False
        cast, mul, q, scale = chain
        weights = _int8_matrix(self.inits[q])
        if weights is None or weights.shape[0] % BLOCK:
            return False
        k, n = weights.shape
        scales = _float_vector(self.inits[scale], n)
        if scales is None:
            return False
        blocks = k // BLOCK
        packed = (weights.T.astype(np.int16) + 128).astype(np.uint8).reshape(n, blocks, BLOCK)
        self.added += [
            _tensor(f"{q}_nbits", packed, _UINT8),
            _tensor(f"{q}_nbits_scale", np.repeat(scales, blocks).astype("<f4"), _FLOAT),
        ]
        attrs = b"".join(
            _int_attr(a, v)
            for a, v in (
                ("K", k),
                ("N", n),
                ("bits", 8),
                ("block_size", BLOCK),
                ("accuracy_level", ACCURACY),
            )
        )
        self.replaced[id(matmul)] = _node(
            "MatMulNBits",
            [matmul.inputs[0], f"{q}_nbits", f"{q}_nbits_scale"],
            matmul.outputs,
            attrs=attrs,
            domain="com.microsoft",
        )
        self.dropped |= {id(cast), id(mul)}
        return True

    def graph(self) -> bytes:
        nodes = iter(self.nodes)
        used = {i for node in self.nodes if id(node) not in self.dropped for i in node.inputs}
        used |= {
            i
            for node in self.nodes
            if id(node) in self.replaced
            for i in _new_inputs(self.replaced[id(node)])
        }
        out = []
        for number, wire, value in self.fields:
            if number == _GRAPH_NODE:
                node = next(nodes)
                if id(node) in self.replaced:
                    out.append(self.replaced[id(node)])
                elif id(node) not in self.dropped:
                    out.append(_field(number, wire, value))
            elif number == _GRAPH_INIT:
                if _tensor_name(value) in used:
                    out.append(_field(number, wire, value))
            else:
                out.append(_field(number, wire, value))
        return b"".join(out + self.added)


def _new_inputs(nodes: bytes) -> list[str]:
    return [i for _, _, v in _fields(nodes) for i in _parse_node(v).inputs]


def keep_int8(model: bytes) -> tuple[bytes, int]:
    """The model with its word embeddings gathered as int8 and its weight MatMuls as
    8-bit MatMulNBits; and the number of nodes rewritten (0: the model as it was).

    Raises:
        ValueError: the bytes are not a protobuf message.
    """
    top = _fields(model)
    graph = next((v for n, _, v in top if n == _MODEL_GRAPH), None)
    if graph is None:
        return model, 0
    rw = _Rewrite(graph)
    for node in rw.nodes:
        if node.op == "Gather" and node.inputs[:1] == [WORDS]:
            rw.gather_first(node)
        elif node.op == "MatMul" and len(node.inputs) == 2:
            rw.nbits(node)
    if not rw.replaced:
        return model, 0
    out = []
    for number, wire, value in top:
        out.append(_field(number, wire, rw.graph() if number == _MODEL_GRAPH else value))
    if any(b"com.microsoft" in r for r in rw.replaced.values()):
        opset = _text(1, "com.microsoft") + _field(2, 0, _put_varint(1))
        out.append(_field(_MODEL_OPSET, _LEN, opset))
    return b"".join(out), len(rw.replaced)
