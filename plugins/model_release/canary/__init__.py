"""The canary gate: serve the candidate beside the production champion on a real Triton and judge it.

Talking to Triton (the local server, the shim, loading, the HTTP client, delivery to a remote
Triton) lives in :mod:`model_release.triton`. Modules here: :mod:`.champion` (the production
champion: served from the store, native from MLflow, or none), :mod:`.compare` (parity against the
native reference), :mod:`.quality` (metrics on ground truth, agreement and distribution shift),
:mod:`.contract` (the interface clients rely on), :mod:`.gates` (each judgement as one line of the
verdict), :mod:`.expect` (a great-expectations suite over the outputs), :mod:`.report`
(report.json, report.html), :mod:`.stage` (:func:`run_canary`, the stage itself).
"""

from .stage import run_canary

__all__ = ["run_canary"]
