"""An ONNX file read for the repository: its inputs and outputs as Triton tensor specs (batch dim dropped),
and a digest of its structure without its weights (what a retrained model of the same shape shares)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..model.dtypes import triton_from_onnx
from ..errors import AssembleError
from ..types import TensorSpec


def onnx_io(path: str | Path) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Read the graph inputs (initializers excluded) and outputs of an ONNX file.

    The first dimension is taken as the batch dimension and dropped; unknown dimensions are -1.

    Raises:
        AssembleError: the file is missing or not an ONNX model.
    """
    p = Path(path)
    model = _load(p, "give a path to an .onnx file relative to the spec")
    initializers = {init.name for init in model.graph.initializer}

    def spec(value: "onnx.ValueInfoProto") -> TensorSpec:
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        return TensorSpec(value.name, triton_from_onnx(tensor.elem_type, what=f"{p.name}: {value.name}"), tuple(dims[1:]))

    inputs = [spec(v) for v in model.graph.input if v.name not in initializers]
    outputs = [spec(v) for v in model.graph.output]
    return inputs, outputs


def _load(p: Path, missing: str):  # noqa: ANN202 - an onnx.ModelProto (onnx is imported lazily)
    """The model at ``p``, its external data left unread.

    Raises:
        AssembleError: the file is missing (the message ends with ``missing``, what to do) or not an ONNX model.
    """
    import onnx  # heavy: only the stages that read ONNX import it

    if not p.is_file():
        raise AssembleError(f"ONNX file {str(p)!r} does not exist; {missing}")
    try:
        return onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and others
        raise AssembleError(f"{str(p)!r} is not a readable ONNX model ({exc}); export it again") from None


def structure_digest(path: str | Path) -> str:
    """sha256 of the graph without its weights: what costs the same to serve, whatever was learnt.

    Kept: the opsets (merged by domain and sorted: converters list them in a per-process order), the
    graph's inputs and outputs, every node (operator, domain, wiring, and its integer and string
    attributes), each initializer's name, type and shape, the values of integer tensors that a node
    reads as a shape, axes, repeats or sizes (:data:`_SHAPE_INPUTS`), and subgraphs alike.
    Summarised: a tree ensemble (``ai.onnx.ml`` TreeEnsemble*) as its number of trees rounded up to
    a power of two and its greatest depth rounded up to a multiple of four, with its labels and
    scalar attributes (a retrain grows other branches, a few levels more or less where the depth is
    not bounded); a TfIdfVectorizer's vocabulary as its size.
    Left out: every other tensor's values (initializers and constants, floating-point, 8-bit and
    integer alike: weights, stored labels, selected columns), float attributes' values (a list
    keeps its length: a linear model's coefficients), names and documentation of the model, graph
    and nodes, metadata at every level (a producer, a run id), and training information. Two exports
    of one pipeline retrained on other data match; a model with another architecture, size or input
    does not.

    Raises:
        AssembleError: the file is missing or not an ONNX model.
    """
    model = _load(Path(path), "give a path to an .onnx file")
    for name in ("doc_string", "producer_name", "producer_version", "domain", "model_version", "training_info"):
        model.ClearField(name)
    _clear_metadata(model)
    shapes = _shape_inputs(model)
    _sort_opsets(model)
    _strip_graph(model.graph, shapes)
    for function in model.functions:
        function.ClearField("doc_string")
        _clear_metadata(function)
        _sort_opsets(function)
        for node in function.node:
            _strip_node(node, shapes)
    return hashlib.sha256(model.SerializeToString(deterministic=True)).hexdigest()


#: operator -> the inputs it reads as a shape, axes, repeats, bounds or sizes: integer values there are structure
_SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "ConstantOfShape": (0,),
    "TopK": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "Range": (0, 1, 2), "Resize": (1, 2, 3),
    "OneHot": (1,), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
    "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,), "CumSum": (1,),
}


def _shape_inputs(model) -> set[str]:  # noqa: ANN001 - an onnx.ModelProto
    """The names of the tensors some node (in any graph or function of ``model``) reads as a shape."""
    import onnx

    names: set[str] = set()

    def visit(nodes) -> None:  # noqa: ANN001
        for node in nodes:
            if node.domain in ("", "ai.onnx"):
                names.update(node.input[i] for i in _SHAPE_INPUTS.get(node.op_type, ()) if i < len(node.input))
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g.node)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        visit(sub.node)

    visit(model.graph.node)
    for function in model.functions:
        visit(function.node)
    names.discard("")
    return names


def _sort_opsets(proto) -> None:  # noqa: ANN001 - an onnx.ModelProto or FunctionProto
    """One entry per domain ("" and "ai.onnx" are one), the highest version, in domain order."""
    versions: dict[str, int] = {}
    for opset in proto.opset_import:
        domain = "" if opset.domain == "ai.onnx" else opset.domain
        versions[domain] = max(versions.get(domain, 0), opset.version)
    del proto.opset_import[:]
    for domain in sorted(versions):
        proto.opset_import.add(domain=domain, version=versions[domain])


_TENSOR_VALUES = ("raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data",
                  "external_data", "data_location", "name", "doc_string")
#: ai.onnx.ml's tree ensembles: their per-node and per-leaf lists are what a retrain learns
_TREES = ("TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble")
_TREE_LISTS = ("nodes_", "class_", "target_", "leaf_", "tree_roots", "membership_values")
#: a TfIdfVectorizer's vocabulary (learnt; its size is what costs)
_VOCABULARY = ("pool_strings", "pool_int64s", "ngram_indexes", "ngram_counts")


def _clear_metadata(proto) -> None:  # noqa: ANN001 - any onnx proto; metadata_props exists on most since onnx 1.16
    if "metadata_props" in proto.DESCRIPTOR.fields_by_name:
        proto.ClearField("metadata_props")


def _strip_tensor(tensor, *, keep_values: bool = False) -> None:  # noqa: ANN001 - an onnx.TensorProto
    import onnx

    _clear_metadata(tensor)
    keep = keep_values and tensor.data_type in (onnx.TensorProto.INT32, onnx.TensorProto.INT64)
    for name in _TENSOR_VALUES:
        if keep and name in ("raw_data", "int32_data", "int64_data"):
            continue  # a shape, axes, repeats: what is computed, not what was learnt
        tensor.ClearField(name)


def _strip_graph(graph, shapes: set[str]) -> None:  # noqa: ANN001 - an onnx.GraphProto
    graph.ClearField("name")
    graph.ClearField("doc_string")
    _clear_metadata(graph)
    for value in [*graph.input, *graph.output, *graph.value_info]:
        _clear_metadata(value)
    for tensor in [*graph.initializer, *(s.values for s in graph.sparse_initializer)]:
        keep = tensor.name
        _strip_tensor(tensor, keep_values=keep in shapes)
        tensor.name = keep  # the wiring reads it
    for sparse in graph.sparse_initializer:
        _strip_tensor(sparse.indices)  # which entries are set is learnt too; the dims stay
    for node in graph.node:
        _strip_node(node, shapes)


def _strip_node(node, shapes: set[str]) -> None:  # noqa: ANN001 - an onnx.NodeProto
    import onnx

    node.ClearField("name")
    node.ClearField("doc_string")
    _clear_metadata(node)
    if node.domain == "ai.onnx.ml" and node.op_type in _TREES:
        _summarise_trees(node)
    shape = node.op_type == "Constant" and any(out in shapes for out in node.output)
    for attr in node.attribute:
        attr.ClearField("doc_string")
        if node.op_type == "TfIdfVectorizer" and attr.name in _VOCABULARY:
            size = len(attr.strings) + len(attr.ints)
            attr.ClearField("strings")
            attr.ClearField("ints")
            attr.i = size
        elif attr.type == onnx.AttributeProto.FLOAT:
            attr.ClearField("f")
        elif attr.type == onnx.AttributeProto.FLOATS:
            count = len(attr.floats)
            del attr.floats[:]
            attr.i = count  # the length stays: the same model on more features is not the same shape
        elif attr.type == onnx.AttributeProto.TENSOR:
            _strip_tensor(attr.t, keep_values=shape)
        elif attr.type == onnx.AttributeProto.TENSORS:
            for tensor in attr.tensors:
                _strip_tensor(tensor)
        elif attr.type == onnx.AttributeProto.GRAPH:
            _strip_graph(attr.g, shapes)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for sub in attr.graphs:
                _strip_graph(sub, shapes)


def _summarise_trees(node) -> None:  # noqa: ANN001 - an onnx.NodeProto of a tree ensemble
    """Replace a tree ensemble's per-node and per-leaf lists by its number of trees and greatest depth."""
    import onnx

    lists = {a.name: list(onnx.helper.get_attribute_value(a)) for a in node.attribute
             if a.name.startswith(_TREE_LISTS) and a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.STRINGS)}
    trees, depth = _tree_shape(lists)
    kept = [a for a in node.attribute if not a.name.startswith(_TREE_LISTS)]
    del node.attribute[:]
    node.attribute.extend(kept)
    node.attribute.extend([onnx.helper.make_attribute("structure_trees", _up_to_power_of_two(trees)),
                           onnx.helper.make_attribute("structure_depth", -(-depth // 4) * 4 if depth > 0 else depth)])


def _up_to_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 0 else n


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
