"""LightGBM (scikit-learn API) → ONNX with onnxmltools (optional extra ``boost``), without ZipMap."""

from __future__ import annotations

from typing import Any

from .xgboost2onnx import XGBoostConverter


class LightGBMConverter(XGBoostConverter):
    flavor = "lightgbm"
    library = "lightgbm"

    def _convert(self, model: Any, types: list[tuple[str, Any]], opset: int) -> Any:
        import onnxmltools

        return onnxmltools.convert_lightgbm(model, initial_types=types, target_opset=opset, zipmap=False)


CONVERTER = LightGBMConverter()
