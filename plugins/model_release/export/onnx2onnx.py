"""ONNX as logged: validated, with inputs and outputs renamed to Triton-valid names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ExportError
from ..types import IntakeResult
from .base import first_line, package_version, rename_io
from ..model.native import NativeModel, OnnxNative


class OnnxConverter:
    flavor = "onnx"

    def versions(self) -> dict[str, str]:
        return {"onnx": package_version("onnx")}

    def convert(self, native: NativeModel, intake: IntakeResult, opset: int, sample: Mapping[str, np.ndarray]) -> Any:
        import onnx

        assert isinstance(native, OnnxNative)
        try:
            model = onnx.load(native.model)
        except Exception as exc:  # noqa: BLE001
            raise ExportError(f"the logged ONNX file {native.model} could not be read ({first_line(exc)})") from exc
        mapping = {graph_name: name for name, graph_name in native.input_map.items()}
        mapping.update(native.output_map)
        return rename_io(model, mapping)


CONVERTER = OnnxConverter()
