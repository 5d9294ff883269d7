"""Export: one module per conversion (``sklearn2onnx``, ``torch2onnx``, ``onnx2onnx``,
``xgboost2onnx``, ``lightgbm2onnx``), shared checks, a conversion cache, and the stage that runs
them behind the parity gate (:func:`export`).

Heavy frameworks (torch, onnxruntime, skl2onnx...) are imported only inside the functions that
use them, so importing this package is cheap.
"""

from __future__ import annotations

from .stage import export

__all__ = ["export"]
