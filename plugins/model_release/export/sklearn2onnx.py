"""scikit-learn → ONNX with skl2onnx: pipelines with preprocessing, classifiers, regressors.

Classifiers are converted without ZipMap (``options={"zipmap": False}``) so they return two plain
tensors Triton can serve: ``label`` (``[N]``) and ``probabilities`` (``[N, classes]``). Regressors
return ``variable`` (``[N, 1]``). Float inputs are converted as float32 (what Triton clients send);
the parity gate measures what that costs against the float64 native model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ExportError
from ..types import IntakeResult, TensorSpec
from .base import first_line, package_version, rename_io
from ..model.native import EstimatorNative, NativeModel


def onnxmltools_type(spec: TensorSpec, shape: list[Any], module: str = "skl2onnx.common.data_types") -> Any:
    """The converter input type (FloatTensorType, ...) for a Triton tensor spec."""
    from importlib import import_module

    types = import_module(module)
    name = {
        "FP32": "FloatTensorType", "FP64": "FloatTensorType", "FP16": "FloatTensorType",
        "INT64": "Int64TensorType", "INT32": "Int32TensorType", "INT16": "Int32TensorType", "INT8": "Int32TensorType",
        "UINT8": "Int32TensorType", "UINT16": "Int32TensorType", "BOOL": "BooleanTensorType", "BYTES": "StringTensorType",
    }.get(spec.datatype)
    if name is None:
        raise ExportError(f'input "{spec.original_name}" has Triton type {spec.datatype}, which the converter cannot take as input')
    return getattr(types, name)(shape)


def initial_types(intake: IntakeResult, columnar: bool, module: str = "skl2onnx.common.data_types") -> list[tuple[str, Any]]:
    """Converter inputs named as the estimator expects them (DataFrame column names when columnar)."""
    out = []
    for spec in intake.inputs:
        shape = [None, *(None if d < 0 else d for d in spec.dims)]
        out.append((spec.original_name if columnar else spec.name, onnxmltools_type(spec, shape, module)))
    return out


class SklearnConverter:
    flavor = "sklearn"

    def versions(self) -> dict[str, str]:
        return {"skl2onnx": package_version("skl2onnx"), "scikit-learn": package_version("scikit-learn"), "onnx": package_version("onnx")}

    def convert(self, native: NativeModel, intake: IntakeResult, opset: int, sample: Mapping[str, np.ndarray]) -> Any:
        from skl2onnx import convert_sklearn

        assert isinstance(native, EstimatorNative)
        options = {"zipmap": False} if native.is_classifier else None
        try:
            onx = convert_sklearn(
                native.model, initial_types=initial_types(intake, native.columnar), target_opset=opset, options=options,
            )
        except Exception as exc:  # noqa: BLE001 - skl2onnx raises many kinds; converted at the boundary
            raise ExportError(
                f"skl2onnx {package_version('skl2onnx')} could not convert the sklearn model "
                f"{type(native.model).__name__} ({first_line(exc)}). Use estimators skl2onnx supports, or register a "
                "converter for the custom step (skl2onnx.update_registered_converter)"
            ) from exc
        # skl2onnx keeps the order of initial_types but may rewrite names ("a b" -> "a_b"): rename by position
        graph_inputs = [v.name for v in onx.graph.input]
        return rename_io(onx, {g: s.name for g, s in zip(graph_inputs, intake.inputs)})


CONVERTER = SklearnConverter()
