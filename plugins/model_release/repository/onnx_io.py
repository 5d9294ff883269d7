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
    integer and string attributes), each initializer's name, type and shape, integer tensors'
    values (shapes, repeats, indices: structure), and subgraphs alike. A tree ensemble
    (``ai.onnx.ml`` TreeEnsemble*) is kept as its number of trees and their greatest depth, its
    labels and scalar attributes: a retrain grows other branches within the same limits.
    Left out: floating-point and 8-bit tensors' values (initializers, constants: the weights),
    float attributes' values (a list keeps its length: a linear model's coefficients), names and
    documentation of the model, graph and nodes, metadata at every level (a producer, a run id),
    and training information. Two exports of one pipeline retrained on other data match; a model
    with another architecture, size or input does not.

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
    for name in ("doc_string", "producer_name", "producer_version", "domain", "model_version", "training_info"):
        model.ClearField(name)
    _clear_metadata(model)
    _strip_graph(model.graph)
    for function in model.functions:
        function.ClearField("doc_string")
        _clear_metadata(function)
        for node in function.node:
            _strip_node(node)
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()


_TENSOR_VALUES = ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data",
                  "external_data", "data_location", "name", "doc_string")
#: ai.onnx.ml's tree ensembles: their per-node and per-leaf lists are what a retrain learns
_TREES = ("TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble")
_TREE_LISTS = ("nodes_", "class_", "target_", "leaf_", "tree_roots", "membership_values")


def _clear_metadata(proto) -> None:  # noqa: ANN001 - any onnx proto; metadata_props exists on most since onnx 1.16
    if "metadata_props" in proto.DESCRIPTOR.fields_by_name:
        proto.ClearField("metadata_props")


def _strip_tensor(tensor, *, keep_integers: bool = True) -> None:  # noqa: ANN001 - an onnx.TensorProto
    import onnx

    _clear_metadata(tensor)
    integer = tensor.data_type in (onnx.TensorProto.INT32, onnx.TensorProto.INT64)
    for name in _TENSOR_VALUES:
        if keep_integers and integer and name in ("raw_data", "int32_data", "int64_data"):
            continue  # a shape, a repeat count, indices: what is computed, not what was learnt
        tensor.ClearField(name)


def _strip_graph(graph) -> None:  # noqa: ANN001 - an onnx.GraphProto
    graph.ClearField("name")
    graph.ClearField("doc_string")
    _clear_metadata(graph)
    for value in [*graph.input, *graph.output, *graph.value_info]:
        _clear_metadata(value)
    for tensor in [*graph.initializer, *(s.values for s in graph.sparse_initializer)]:
        keep = tensor.name
        _strip_tensor(tensor)
        tensor.name = keep  # the wiring reads it
    for sparse in graph.sparse_initializer:
        _strip_tensor(sparse.indices, keep_integers=False)  # which entries are set is learnt too; the dims stay
    for node in graph.node:
        _strip_node(node)


def _strip_node(node) -> None:  # noqa: ANN001 - an onnx.NodeProto
    import onnx

    node.ClearField("name")
    node.ClearField("doc_string")
    _clear_metadata(node)
    if node.domain == "ai.onnx.ml" and node.op_type in _TREES:
        _summarise_trees(node)
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


def _summarise_trees(node) -> None:  # noqa: ANN001 - an onnx.NodeProto of a tree ensemble
    """Replace a tree ensemble's per-node and per-leaf lists by its number of trees and greatest depth."""
    import onnx

    lists = {a.name: list(onnx.helper.get_attribute_value(a)) for a in node.attribute
             if a.name.startswith(_TREE_LISTS) and a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.STRINGS)}
    trees, depth = _tree_shape(lists)
    kept = [a for a in node.attribute if not a.name.startswith(_TREE_LISTS)]
    del node.attribute[:]
    node.attribute.extend(kept)
    node.attribute.extend([onnx.helper.make_attribute("structure_trees", trees),
                           onnx.helper.make_attribute("structure_depth", depth)])


def _tree_shape(lists: dict[str, list]) -> tuple[int, int]:
    """(trees, greatest depth in branch levels) from a tree ensemble's integer lists; (-1, -1) when it has neither form."""
    children: dict[tuple, list[tuple]]
    if "tree_roots" in lists:  # ai.onnx.ml opset 5: interior nodes by index; a child is a leaf where its flag is set
        sides = zip(lists.get("nodes_truenodeids", []), lists.get("nodes_trueleafs", []),
                    lists.get("nodes_falsenodeids", []), lists.get("nodes_falseleafs", []))
        children = {(i,): [(c,) for c, leaf in ((t, tl), (f, fl)) if not leaf] for i, (t, tl, f, fl) in enumerate(sides)}
        roots, trees = [(r,) for r in lists["tree_roots"]], len(lists["tree_roots"])
    elif "nodes_treeids" in lists:  # opsets 1-3: every node by (tree, id), leaves marked LEAF in nodes_modes
        keys = list(zip(lists["nodes_treeids"], lists.get("nodes_nodeids", [])))
        modes = [m.decode() if isinstance(m, bytes) else str(m) for m in lists.get("nodes_modes", [])]
        inner = {k for k, mode in zip(keys, modes) if mode != "LEAF"}
        children = {k: [c for c in ((k[0], t), (k[0], f)) if c in inner]
                    for k, t, f in zip(keys, lists.get("nodes_truenodeids", []), lists.get("nodes_falsenodeids", [])) if k in inner}
        below = {c for cs in children.values() for c in cs}
        roots, trees = [k for k in children if k not in below], len(set(lists["nodes_treeids"]))
    else:
        return -1, -1
    depth, seen = 0, set()
    for root in roots:
        stack = [(root, 1)]
        while stack:
            key, level = stack.pop()
            if key in seen:  # a malformed graph's cycle ends here
                continue
            seen.add(key)
            depth = max(depth, level)
            stack.extend((c, level + 1) for c in children.get(key, []))
    return trees, depth
