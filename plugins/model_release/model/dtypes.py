"""Data type mapping between numpy, MLflow signatures, ONNX and Triton.

Triton names types two ways: ``TYPE_FP32`` in config.pbtxt and ``FP32`` on the wire
(tritonclient). This module keeps the wire form (``FP32``) as the canonical one.
"""

from __future__ import annotations

import numpy as np

from ..errors import IntakeError

# numpy dtype name -> Triton wire datatype
_NUMPY_TO_TRITON: dict[str, str] = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "object": "BYTES",
    "bytes": "BYTES",
    "str": "BYTES",
}

_TRITON_TO_NUMPY: dict[str, str] = {
    "BOOL": "bool",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
    "BYTES": "object",
}

# MLflow signature type names (mlflow.types.DataType and TensorSpec numpy names) -> Triton
_MLFLOW_TO_TRITON: dict[str, str] = {
    "boolean": "BOOL",
    "integer": "INT32",
    "long": "INT64",
    "float": "FP32",
    "double": "FP64",
    "string": "BYTES",
    "binary": "BYTES",
}

# ONNX TensorProto.DataType numbers -> Triton
_ONNX_TO_TRITON: dict[int, str] = {
    1: "FP32", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "BYTES", 9: "BOOL", 10: "FP16", 11: "FP64", 12: "UINT32", 13: "UINT64", 16: "BF16",
}

TRITON_TYPES = frozenset(_TRITON_TO_NUMPY) | {"BF16"}
#: the floating wire types (what a prediction, a score or a vector is served as)
FLOAT_TYPES = frozenset({"FP16", "FP32", "FP64", "BF16"})


def triton_from_numpy(dtype: object, *, what: str = "tensor") -> str:
    """Map a numpy dtype (or its name) to Triton's wire datatype, refusing what has no mapping."""
    try:
        np_dtype = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError as exc:
        raise IntakeError(
            f"{what}: dtype {dtype!r} is not a numpy dtype; valid: {sorted(_NUMPY_TO_TRITON)}"
        ) from exc
    name = "str" if np_dtype.kind == "U" else "bytes" if np_dtype.kind == "S" else np_dtype.name
    try:
        return _NUMPY_TO_TRITON[name]
    except KeyError:
        raise IntakeError(
            f"{what}: dtype {np_dtype.name!r} has no Triton data type; valid: "
            f"{', '.join(sorted(k for k in _NUMPY_TO_TRITON if k not in ('bytes', 'str')))}. "
            "Cast it in the model (or its signature) to one of these before registering it."
        ) from None


def triton_from_mlflow(type_name: str, *, what: str = "tensor") -> str:
    """Map an MLflow signature type (``double``, ``long``, or a numpy name) to Triton's datatype."""
    if type_name in _MLFLOW_TO_TRITON:
        return _MLFLOW_TO_TRITON[type_name]
    return triton_from_numpy(type_name, what=what)


def triton_from_onnx(elem_type: int, *, what: str = "tensor") -> str:
    try:
        return _ONNX_TO_TRITON[elem_type]
    except KeyError:
        raise ExportErrorForDtype(what, elem_type) from None


def numpy_from_triton(datatype: str) -> np.dtype:
    try:
        return np.dtype(_TRITON_TO_NUMPY[datatype])
    except KeyError:
        raise IntakeError(
            f"Triton data type {datatype!r} has no numpy equivalent; valid: {sorted(_TRITON_TO_NUMPY)}"
        ) from None


def config_type(datatype: str) -> str:
    """``FP32`` -> ``TYPE_FP32`` (config.pbtxt); ``BYTES`` -> ``TYPE_STRING``."""
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


def wire_type(config_datatype: str) -> str:
    """``TYPE_FP32`` -> ``FP32``; ``TYPE_STRING`` -> ``BYTES``."""
    name = config_datatype.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def ExportErrorForDtype(what: str, elem_type: int) -> Exception:  # noqa: N802 - a factory
    from ..errors import ExportError

    return ExportError(
        f"{what}: ONNX element type {elem_type} has no Triton data type; valid ONNX types: "
        f"{sorted(_ONNX_TO_TRITON)}. Cast the output in the model before export."
    )
