"""The TensorRT stage: ONNX -> TensorRT plan on a GPU worker (queue ``gpu``), behind a parity gate.

``spec.tensorrt.mode`` decides what a missing GPU means:

- ``off``: the stage records that it was not asked for;
- ``prefer``: the stage is skipped with the reason recorded (the repository serves the ONNX model),
  also for a graph TensorRT cannot parse and when the build fails (:mod:`.decide`);
- ``require``: the release stops with :class:`~model_release.errors.GpuUnavailable` (or the parse or
  build error).

The build itself is in :mod:`model_release.tensorrt.onnx2trt`; it imports TensorRT only when run.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ExportError, GpuUnavailable
from ..spec import ReleaseSpec
from ..types import ExportResult, TensorRTResult
from ..workspace import Workspace
from .decide import fallback, not_buildable
from .onnx2trt import gpu_environment

Builder = Callable[[ReleaseSpec, ExportResult, Workspace, dict], TensorRTResult]
#: what this worker can build with: its GPU stack's facts, and why it cannot build a plan (None if it can)
Environment = Callable[[], tuple[dict[str, str], str | None]]


def build_plan(spec: ReleaseSpec, export: ExportResult, ws: Workspace, *,
               environment: Environment = gpu_environment,
               build: Builder | None = None) -> TensorRTResult:
    """Build (or decline to build) a TensorRT plan for the exported ONNX model.

    In order: ``off`` records that it was not asked; a graph TensorRT cannot parse (``ai.onnx.ml``
    operators) is skipped under ``prefer`` and refused under ``require``; a dynamic dimension needs
    its range in the spec; a worker without a GPU or TensorRT skips (``prefer``) or stops
    (``require``); a parse or build failure falls back to ONNX under ``prefer``, with the reason.

    Args:
        environment: reports this worker's GPU stack and why it cannot build
            (:func:`~.onnx2trt.gpu_environment` by default; tests inject a worker without one).
        build: builds and checks the plan (:func:`~.onnx2trt.build_and_check` by default).

    Raises:
        GpuUnavailable: ``require`` and this worker has no GPU or no TensorRT.
        ExportError: ``require`` and the graph cannot be parsed or built.
        SpecError: a dynamic non-batch dimension has no range in ``tensorrt.shapes``.
    """
    mode = spec.tensorrt.mode
    if mode == "off":
        return TensorRTResult(built=False, reason="tensorrt.mode is 'off' in the release spec")
    skipped = not_buildable(spec, export.onnx_path, export.inputs)
    env, missing = environment()
    if skipped:
        return TensorRTResult(built=False, reason=skipped, environment=env)
    if missing:
        if mode == "require":
            raise GpuUnavailable(
                f"tensorrt.mode is 'require' but this worker cannot build TensorRT plans: {missing}. "
                "Run this task on a worker of queue 'gpu' with TensorRT installed, or set tensorrt.mode to "
                "'prefer' to release the ONNX model without a plan.",
            )
        return TensorRTResult(built=False, reason=f"skipped: {missing} (tensorrt.mode is 'prefer')", environment=env)
    if build is None:
        from .onnx2trt import build_and_check as build
    try:
        return build(spec, export, ws, env)
    except ExportError as exc:  # a parse or build failure (a parity failure is a ParityError: a gate, not this)
        return fallback(spec, exc, env)
