"""The inputs and outputs of an ONNX file as Triton tensor specs (batch dim dropped)."""

from __future__ import annotations

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
