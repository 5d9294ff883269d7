"""The TensorRT stage: ONNX -> TensorRT plan on a GPU worker (queue ``gpu``), behind a parity gate.

``spec.tensorrt.mode`` decides what a missing GPU means:

- ``off``: the stage records that it was not asked for;
- ``prefer``: the stage is skipped with the reason recorded (the repository serves the ONNX model);
- ``require``: the release stops with :class:`~model_release.errors.GpuUnavailable`.

The build itself is in :mod:`model_release.tensorrt.onnx2trt`; it imports TensorRT only when run.
"""

from __future__ import annotations

from ..errors import GpuUnavailable
from ..spec import ReleaseSpec
from ..types import ExportResult, TensorRTResult
from ..workspace import Workspace
from .onnx2trt import gpu_environment


def build_plan(spec: ReleaseSpec, export: ExportResult, ws: Workspace) -> TensorRTResult:
    """Build (or decline to build) a TensorRT plan for the exported ONNX model.

    Raises:
        GpuUnavailable: ``tensorrt.mode`` is ``require`` and this worker has no GPU or no TensorRT.
    """
    mode = spec.tensorrt.mode
    if mode == "off":
        return TensorRTResult(built=False, reason="tensorrt.mode is 'off' in the release spec")
    env, missing = gpu_environment()
    if missing:
        if mode == "require":
            raise GpuUnavailable(
                f"tensorrt.mode is 'require' but this worker cannot build TensorRT plans: {missing}. "
                "Run this task on a worker of queue 'gpu' with TensorRT installed, or set tensorrt.mode to "
                "'prefer' to release the ONNX model without a plan.",
            )
        return TensorRTResult(built=False, reason=f"skipped: {missing} (tensorrt.mode is 'prefer')", environment=env)
    from .onnx2trt import build_and_check

    return build_and_check(spec, export, ws, env)
