"""An ONNX file read for the repository: its inputs and outputs as Triton tensor specs (batch dim dropped),
and a digest of its structure without its weights (what a retrained model of the same shape shares)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..dtypes import triton_from_onnx
from ..errors import AssembleError
from ..types import TensorSpec


def onnx_io(path: str | Path) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Read the graph inputs (initializers excluded) and outputs of an ONNX file.

    The first dimension is taken as the batch dimension and dropped; unknown dimensions are -1.

    Raises:
        AssembleError: the file is missing or not an ONNX model.
    """
    import onnx  # heavy: only the stages that read ONNX import it

    p = Path(path)
    if not p.is_file():
        raise AssembleError(f"ONNX file {str(p)!r} does not exist; give a path to an .onnx file relative to the spec")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and others
        raise AssembleError(f"{str(p)!r} is not a readable ONNX model ({exc}); export it again") from None
    initializers = {init.name for init in model.graph.initializer}

    def spec(value: "onnx.ValueInfoProto") -> TensorSpec:
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        return TensorSpec(value.name, triton_from_onnx(tensor.elem_type, what=f"{p.name}: {value.name}"), tuple(dims[1:]))

    inputs = [spec(v) for v in model.graph.input if v.name not in initializers]
    outputs = [spec(v) for v in model.graph.output]
    return inputs, outputs


def structure_digest(path: str | Path) -> str:
    """sha256 of the graph without its weights: what costs the same to serve, whatever was learnt.

    Kept: the opsets, the graph's inputs and outputs, every node (operator, domain, wiring, and its
    integer and string attributes), each initializer's name, type and shape, and subgraphs alike.
    Left out: the initializers' values, float attributes' values (a list keeps its length: a linear
    model's coefficients, a tree's thresholds), constant tensors' values, names and documentation of
    the model, graph and nodes, and metadata (a producer, a run id). Two exports of one pipeline
    retrained on other data match; a model with another architecture, size or input does not.

    Raises:
        AssembleError: the file is missing or not an ONNX model.
    """
    import onnx

    p = Path(path)
    try:
        model = onnx.load(str(p), load_external_data=False)
    except FileNotFoundError:
        raise AssembleError(f"ONNX file {str(p)!r} does not exist; give a path to an .onnx file") from None
    except Exception as exc:  # onnx raises DecodeError and others
        raise AssembleError(f"{str(p)!r} is not a readable ONNX model ({exc}); export it again") from None
    for name in ("doc_string", "producer_name", "producer_version", "domain", "model_version"):
        model.ClearField(name)
    del model.metadata_props[:]
    _strip_graph(model.graph)
    for function in model.functions:
        function.ClearField("doc_string")
        for node in function.node:
            _strip_node(node)
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()


_TENSOR_VALUES = ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data",
                  "external_data", "data_location", "name", "doc_string")


def _strip_tensor(tensor) -> None:  # noqa: ANN001 - an onnx.TensorProto (onnx is imported lazily)
    for name in _TENSOR_VALUES:
        tensor.ClearField(name)


def _strip_graph(graph) -> None:  # noqa: ANN001 - an onnx.GraphProto
    graph.ClearField("name")
    graph.ClearField("doc_string")
    for tensor in [*graph.initializer, *(s.values for s in graph.sparse_initializer)]:
        keep = tensor.name
        _strip_tensor(tensor)
        tensor.name = keep  # the wiring reads it
    for sparse in graph.sparse_initializer:
        _strip_tensor(sparse.indices)  # which entries are set is learnt too; the dims stay
    for node in graph.node:
        _strip_node(node)


def _strip_node(node) -> None:  # noqa: ANN001 - an onnx.NodeProto
    import onnx

    node.ClearField("name")
    node.ClearField("doc_string")
    for attr in node.attribute:
        attr.ClearField("doc_string")
        if attr.type == onnx.AttributeProto.FLOAT:
            attr.ClearField("f")
        elif attr.type == onnx.AttributeProto.FLOATS:
            count = len(attr.floats)
            del attr.floats[:]
            attr.i = count  # the length stays: the same model on more features is not the same shape
        elif attr.type == onnx.AttributeProto.TENSOR:
            _strip_tensor(attr.t)
        elif attr.type == onnx.AttributeProto.TENSORS:
            for tensor in attr.tensors:
                _strip_tensor(tensor)
        elif attr.type == onnx.AttributeProto.GRAPH:
            _strip_graph(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for sub in attr.graphs:
                _strip_graph(sub)
