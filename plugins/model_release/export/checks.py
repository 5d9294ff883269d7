"""Checks every ONNX file passes before parity: the full checker, strict shape inference, a batch axis, the opset.

Also reads back what Triton needs to know (tensor specs and the opset) and runs the optional
graph simplification (onnxslim).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model.dtypes import triton_from_onnx
from ..errors import ExportError
from ..types import TensorSpec
from .base import first_line

if TYPE_CHECKING:
    from ..spec import ReleaseSpec


def check_onnx(path: Path, *, what: str = "the ONNX model") -> Any:
    """Run ``onnx.checker`` (full check) and strict shape inference on the saved file.

    Returns:
        The loaded ``ModelProto``.

    Raises:
        ExportError: the checker or shape inference refused it (with their first line).
    """
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:  # noqa: BLE001 - ValidationError, InferenceError, ...
        raise ExportError(f"{what} failed onnx.checker ({first_line(exc)}); the file is {path}") from exc
    model = onnx.load(str(path))
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:  # noqa: BLE001
        raise ExportError(f"{what} failed strict shape inference ({first_line(exc)}); the file is {path}") from exc
    return model


def check_opset(spec: ReleaseSpec, shipped: int, notes: dict[str, str], flavor: str) -> None:
    """Honour ``export.opset`` or refuse: a file above it is refused unless ``export.allow_other_opset``.

    A file below it is shipped (every runtime that loads the asked opset loads the older ones); either
    difference is recorded in ``notes["opset"]`` (the converter's reason, when it gave one), which the
    export stage line repeats.

    Raises:
        ExportError: the file imports a higher opset than asked and the spec does not allow it.
    """
    asked = spec.export.opset
    if shipped == asked:
        notes.pop("opset", None)
        return
    why = notes.get("opset") or f"the {flavor} converter reached opset {shipped}"
    if shipped > asked and not spec.export.allow_other_opset:
        raise ExportError(
            f"export.opset {asked} is not honoured: the {flavor} model exports at opset {shipped} ({why}); a runtime pinned "
            f"to opset {asked} may not load it, so it is not shipped. Set export.opset: {shipped} in {spec.where} if the "
            f"serving runtime takes it, or export.allow_other_opset: true to ship opset {shipped} and record it"
        )
    notes["opset"] = why


def opset_of(model: Any) -> int:
    """The default-domain (``ai.onnx``) opset the model imports; 0 when it uses no standard operator."""
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def opset_imports(model: Any) -> str:
    """Every domain's opset, e.g. ``ai.onnx=17,ai.onnx.ml=1``."""
    versions: dict[str, int] = {}
    for o in model.opset_import:
        domain = o.domain or "ai.onnx"
        versions[domain] = max(versions.get(domain, 0), o.version)
    return ",".join(f"{d}={v}" for d, v in sorted(versions.items()))


def tensor_specs(model: Any, *, require_batch: bool) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The graph's inputs and outputs as Triton tensor specs (dims without the batch dimension).

    Raises:
        ExportError: a tensor has no known rank, a type with no Triton mapping, or (with
            ``require_batch``) an input whose first dimension is fixed.
    """
    initializers = {i.name for i in model.graph.initializer}
    inputs = [_spec(v, "input", require_batch) for v in model.graph.input if v.name not in initializers]
    outputs = [_spec(v, "output", require_batch) for v in model.graph.output]
    return inputs, outputs


def _spec(value: Any, kind: str, require_batch: bool) -> TensorSpec:
    tensor = value.type.tensor_type
    what = f'ONNX {kind} "{value.name}"'
    if not value.type.HasField("tensor_type"):
        raise ExportError(f"{what} is not a tensor (it is {value.type.WhichOneof('value')}); Triton serves tensors only")
    if not tensor.HasField("shape") or not tensor.shape.dim:
        raise ExportError(f"{what} has no known shape; Triton needs its rank (export with static ranks)")
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
    if require_batch and dims[0] != -1:
        raise ExportError(
            f"{what} has a fixed first dimension {dims[0]}; the release batches requests, so export it with a "
            "dynamic batch axis (or set repository.max_batch_size: 0). Triton's onnxruntime backend refuses a "
            "batching model whose tensors do not start with a variable dimension"
        )
    return TensorSpec(name=value.name, datatype=triton_from_onnx(tensor.elem_type, what=what), dims=tuple(dims[1:]))


def simplify(model: Any) -> Any:
    """onnxslim's simplification of ``model`` (a new ModelProto)."""
    try:
        import onnxslim
    except ImportError as exc:
        raise ExportError("export.simplify is on but onnxslim is not installed; pip install 'model-release[slim]'") from exc
    try:
        return onnxslim.slim(model)
    except Exception as exc:  # noqa: BLE001
        raise ExportError(f"onnxslim could not simplify the graph ({first_line(exc)}); set export.simplify: false") from exc
