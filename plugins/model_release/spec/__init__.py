"""The release spec: what to release, how, and with which gates (YAML, validated).

A spec is small and declarative; everything it names is checked here, before any stage runs, so a
typo fails in a second with the field, the bad value and what is valid::

    name: iris                       # the release pipeline's name (Triton ensemble name)
    schedule: "@daily"               # optional: cron, preset or duration (30m) for DAG model_release__iris
    model:
      name: iris-classifier          # MLflow registered model
      alias: candidate               # or: version: 3
    golden:
      source: input_example          # or: file (path: golden.npz) ; rows: at most this many
    export:
      opset: 17
      tolerances:
        default: {atol: 1.0e-5, rtol: 1.0e-4}
        probabilities: {atol: 1.0e-5, rtol: 1.0e-4}
    repository:
      shape: classifier              # classifier | embedding | cascade | fanout | single
      max_batch_size: 64
      labels: [setosa, versicolor, virginica]
      # shape: cascade needs a cascade block, shape: fanout a fanout block; a member is
      # "release" (this release's model) or a path to another .onnx file, relative to the spec:
      # cascade: {small: release, large: models/large.onnx, threshold: 0.9, output: probabilities}
      # fanout: {members: {lr: release, tree: models/tree.onnx}, output: probabilities, combine: mean}
    canary:
      tolerances: {default: {atol: 1.0e-5, rtol: 1.0e-4}}
      min_label_agreement: 1.0
    promote:
      store: s3://model-store/iris   # or file:///abs/path
      channel: production
      mlflow_alias: production
    serve:
      watch:                         # after each roll-out wave: Triton's metrics, new release vs old
        bake_s: 120                  # interval_s, min_requests, failures, settle, budget_s too
        error_rate: {absolute: 0.05, ratio: 2.0, floor: 0.005}
        p99_us: {ratio: 1.5, floor: 5000}   # also mean_request_us, mean_queue_us
        probe: {rows: probe.json}    # production-like request bodies the watch sends itself

The package, by job:

- :mod:`.release`: :class:`ReleaseSpec` (the whole spec), :func:`load_spec` and :func:`parse_spec`,
  field errors listed by name;
- :mod:`.sections`: ``model``, ``golden``, ``export``, ``tensorrt``, ``promote``;
- :mod:`.shapes`: ``repository`` and its shapes (cascade, fanout);
- :mod:`.canary`: ``canary`` (tolerances, quality and champion gates, load phase, tuning);
- :mod:`.paired`: the paired gates' settings (``canary.confidence``, ``canary.classes``, ``canary.calibration``), their
  defaults and dotted names;
- :mod:`.serve`: ``serve`` (the roll-out after promotion, its warm-up rule) and ``serve.watch`` (the watch's rules after each wave);
- :mod:`.schedule`: ``schedule`` and what Airflow's ``schedule=`` takes for it;
- :mod:`.loader`: the bounded read and the hardened YAML loader (also ``model-release report``'s read);
- :mod:`.strict`: the strict base of every section, and the tolerances.
"""

from __future__ import annotations

from .canary import DEFAULT_QUALITY_GATES, CanarySpec, ChampionGates, InconclusiveSpec, LoadSpec, MetricGate, TuneSpec
from .paired import CalibrationGates, ClassGates
from .loader import MAX_SPEC_BYTES, MAX_SPEC_DEPTH, MAX_SPEC_NODES, parse_yaml, read_bounded_text
from .release import MAX_LISTED_ERRORS, ReleaseSpec, load_spec, parse_spec, spec_from_record
from .schedule import check_schedule, schedule_value
from .sections import (
    DEFAULT_MIN_GOLDEN_ROWS, MAX_MODEL_VERSION, ExportSpec, GoldenSpec, ModelRef, PromoteSpec, ShapeRange, TensorRTSpec,
)
from .serve import ProbeSpec, ServeSpec, WarmupSpec, WatchLimit, WatchSpec
from .shapes import RELEASE, CascadeSpec, DynamicBatching, FanoutSpec, RepositorySpec
from .strict import Tolerance, Tolerances

__all__ = [
    "CalibrationGates", "CanarySpec", "ClassGates", "CascadeSpec", "ChampionGates", "DEFAULT_MIN_GOLDEN_ROWS", "DEFAULT_QUALITY_GATES", "DynamicBatching",
    "ExportSpec", "FanoutSpec", "GoldenSpec", "InconclusiveSpec", "LoadSpec", "MAX_LISTED_ERRORS", "MAX_MODEL_VERSION", "MAX_SPEC_BYTES",
    "MAX_SPEC_DEPTH", "MAX_SPEC_NODES", "MetricGate", "ModelRef", "ProbeSpec", "PromoteSpec", "RELEASE", "ReleaseSpec",
    "RepositorySpec", "ServeSpec", "ShapeRange", "TensorRTSpec", "Tolerance", "Tolerances", "TuneSpec", "WarmupSpec", "WatchLimit",
    "WatchSpec", "check_schedule",
    "load_spec", "parse_spec", "spec_from_record", "parse_yaml", "read_bounded_text", "schedule_value",
]
