"""LightGBM (scikit-learn API) → ONNX with onnxmltools (optional extra ``boost``), without ZipMap.

onnxmltools declares a classifier's ``label`` output with the fixed shape ``[1]`` although it
holds one label per row; Triton's onnxruntime backend refuses that for a batching model, so the
first dimension of such outputs is declared variable (``N``) after the conversion.
"""

from __future__ import annotations

from typing import Any

from .xgboost2onnx import XGBoostConverter


class LightGBMConverter(XGBoostConverter):
    flavor = "lightgbm"
    library = "lightgbm"

    def _convert(self, model: Any, types: list[tuple[str, Any]], opset: int) -> Any:
        import onnxmltools

        converted = onnxmltools.convert_lightgbm(model, initial_types=types, target_opset=opset, zipmap=False)
        for output in converted.graph.output:
            dims = output.type.tensor_type.shape.dim
            if dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
                dims[0].dim_param = "N"  # one row per input row: the batch dimension, not a fixed 1
        return converted


CONVERTER = LightGBMConverter()
