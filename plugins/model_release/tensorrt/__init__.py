"""TensorRT: ONNX -> TensorRT plan on a GPU worker (queue ``gpu``), behind a parity gate.

- :mod:`.stage`: the stage (:func:`build_plan`): what ``spec.tensorrt.mode`` makes of a worker
  without a GPU, a graph TensorRT cannot parse and a failed build;
- :mod:`.decide`: those decisions (the graphs it cannot parse, the profile shapes, the fallback);
- :mod:`.onnx2trt`: the build and its parity check; it imports TensorRT only when run.
"""

from __future__ import annotations

from .stage import Builder, Environment, build_plan

__all__ = ["Builder", "Environment", "build_plan"]
