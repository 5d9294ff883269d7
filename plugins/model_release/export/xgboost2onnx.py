"""XGBoost (scikit-learn API) → ONNX with onnxmltools (optional extra ``boost``).

Classifiers return ``label`` and ``probabilities``, regressors ``variable``, like skl2onnx.
onnxmltools supports a lower opset than skl2onnx: the highest it supports is used when the spec
asks for more, and the ONNX file's real opset is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ExportError
from ..types import IntakeResult
from .base import first_line, package_version
from ..model.native import EstimatorNative, NativeModel
from .sklearn2onnx import initial_types


def onnxmltools_opset(opset: int) -> int:
    from onnxmltools.convert.common.onnx_ex import get_maximum_opset_supported

    return min(opset, get_maximum_opset_supported())


class XGBoostConverter:
    flavor = "xgboost"
    library = "xgboost"

    def versions(self) -> dict[str, str]:
        return {"onnxmltools": package_version("onnxmltools"), self.library: package_version(self.library), "onnx": package_version("onnx")}

    def _convert(self, model: Any, types: list[tuple[str, Any]], opset: int) -> Any:
        import onnxmltools

        return onnxmltools.convert_xgboost(model, initial_types=types, target_opset=opset)

    def convert(self, native: NativeModel, intake: IntakeResult, opset: int, sample: Mapping[str, np.ndarray]) -> Any:
        if not isinstance(native, EstimatorNative) or native.columnar:
            raise ExportError(
                f"the {self.flavor} model must be a scikit-learn API estimator taking one feature matrix "
                f"(log XGBClassifier/XGBRegressor or LGBMClassifier/LGBMRegressor with a numpy input example)"
            )
        types = initial_types(intake, False, "onnxmltools.convert.common.data_types")
        try:
            return self._convert(native.model, types, onnxmltools_opset(opset))
        except Exception as exc:  # noqa: BLE001
            raise ExportError(
                f"onnxmltools {package_version('onnxmltools')} could not convert the {self.flavor} model "
                f"{type(native.model).__name__} ({first_line(exc)})"
            ) from exc


CONVERTER = XGBoostConverter()
