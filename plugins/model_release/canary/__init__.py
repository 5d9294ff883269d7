"""The canary gate: serve the candidate on a real Triton and prove it before promotion.

Modules: :mod:`.shim` (the canary copy of the repository, ONNX leaves served by a python-backend
onnxruntime shim on the local CPU Triton), :mod:`.server` (load in dependency order, metadata),
:mod:`.client` (replay the golden set with bounded concurrency, timed), :mod:`.compare` (parity
against the native reference and the production baseline), :mod:`.expect` (a great-expectations
suite over the outputs), :mod:`.report` (verdict, report.json, report.html), :mod:`.stage`
(:func:`run_canary`, the stage itself).
"""

from .stage import run_canary

__all__ = ["run_canary"]
