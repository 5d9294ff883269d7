"""The canary gate: serve the candidate beside the production champion on a real Triton and judge it.

Talking to Triton (the local server, the shim, loading, the HTTP client, delivery to a remote
Triton) lives in :mod:`model_release.triton`. The canary, in rooms by phase:

- :mod:`.stage` (:func:`run_canary`, the stage: serve, measure, judge, report);
- :mod:`.serve` (both models on one Triton, the golden rows replayed through each),
  :mod:`.served` (what serving hands the judges: the golden set and the replays) and
  :mod:`.champion` (the production champion: served from the store, native from MLflow, or none);
- :mod:`.measure` (the load phase, time per model, the serving-configuration search);
- :mod:`.judge` (parity, quality, contract, expectations: every check a gate);
- :mod:`.report` (report.json, its page and plots, the decision lines, the MLflow record).
"""

from .stage import run_canary

__all__ = ["run_canary"]
