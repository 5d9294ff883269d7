"""PyTorch → ONNX with torch.onnx (the torch.export-based exporter), with a dynamic batch axis.

The model is traced on a golden batch (at least two rows, so the batch size is not specialised);
dimension 0 of every input and output is exported as the symbolic ``batch``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ExportError
from ..types import IntakeResult
from .base import first_line, package_version
from ..model.native import NativeModel, cast_input, output_names


class TorchConverter:
    flavor = "pytorch"

    def versions(self) -> dict[str, str]:
        return {"torch": package_version("torch"), "onnxscript": package_version("onnxscript"), "onnx": package_version("onnx")}

    def convert(self, native: NativeModel, intake: IntakeResult, opset: int, sample: Mapping[str, np.ndarray]) -> Any:
        import torch

        tensors = []
        for spec in intake.inputs:
            arr = np.ascontiguousarray(cast_input(sample[spec.name], spec))
            if arr.shape[0] < 2:  # a batch of one would be specialised to a static 1
                arr = np.concatenate([arr, arr])
            tensors.append(torch.from_numpy(arr))
        outs = native.predict({s.name: t.numpy() for s, t in zip(intake.inputs, tensors)})
        names = output_names(len(outs), intake.outputs)
        batch = torch.export.Dim("batch", min=1)
        try:
            with _quiet():
                program = torch.onnx.export(
                    native.model, tuple(tensors),
                    input_names=[s.name for s in intake.inputs], output_names=names,
                    dynamic_shapes=tuple({0: batch} for _ in tensors),
                    opset_version=opset, dynamo=True, verbose=False, optimize=True,
                )
        except Exception as exc:  # noqa: BLE001 - torch.export raises many kinds
            raise ExportError(
                f"torch.onnx {package_version('torch')} could not export the pytorch model {type(native.model).__name__} "
                f"({first_line(exc)}). Make forward() traceable by torch.export (no data-dependent Python control flow), "
                "or log an ONNX model instead"
            ) from exc
        return program.model_proto


@contextlib.contextmanager
def _quiet() -> Any:
    """torch.onnx prints progress and warnings; keep them out of the pipeline's logs."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "torch.fx")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


CONVERTER = TorchConverter()
