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
      shape: classifier              # classifier | cascade | fanout | single
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
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import names
from .errors import SpecError

#: a cascade or fanout member that is this release's own exported model
RELEASE = "release"
_MEMBER_RE = re.compile(r"[a-z][a-z0-9_]{0,30}")
_TENSOR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tolerance(_Strict):
    atol: float = Field(1e-5, ge=0)
    rtol: float = Field(1e-4, ge=0)


class Tolerances(_Strict):
    """Per-output tolerances; ``default`` applies to outputs not named."""

    model_config = ConfigDict(extra="allow", frozen=True)
    default: Tolerance = Tolerance()

    @model_validator(mode="before")
    @classmethod
    def _coerce_extra(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: (Tolerance.model_validate(v) if k != "default" and isinstance(v, dict) else v) for k, v in data.items()}
        return data

    def for_output(self, name: str) -> Tolerance:
        extra = self.model_extra or {}
        value = extra.get(name, self.default)
        return value if isinstance(value, Tolerance) else Tolerance.model_validate(value)

    def named(self) -> dict[str, Tolerance]:
        return {k: v for k, v in (self.model_extra or {}).items() if isinstance(v, Tolerance)}


class ModelRef(_Strict):
    name: str = Field(min_length=1)
    alias: str | None = None
    version: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _one_of(self) -> "ModelRef":
        if (self.alias is None) == (self.version is None):
            raise ValueError("give exactly one of model.alias (e.g. candidate) or model.version (e.g. 3)")
        if self.alias is not None and not names.is_alias(self.alias):
            raise ValueError(f"model.alias {self.alias!r} is not a valid MLflow alias (letters, digits, _ and -)")
        return self

    @property
    def uri(self) -> str:
        return f"models:/{self.name}@{self.alias}" if self.alias else f"models:/{self.name}/{self.version}"


#: golden.min_rows when the spec gives none: fewer rows than this judge nothing
DEFAULT_MIN_GOLDEN_ROWS = 100


class GoldenSpec(_Strict):
    """``golden``: the rows every gate replays.

    ``source`` is ``input_example`` (the rows logged with the model) or ``file`` (``path``: an
    .npz or .parquet file relative to the spec); at most ``rows`` rows are used, read
    ``batch_rows`` at a time. ``target`` names the file's ground-truth column (class values or
    label names for a classifier, numbers for a regressor); without it the quality gates are
    skipped and the report says so. A golden set of fewer than ``min_rows`` rows (default 100)
    is refused; lowering it is recorded in the report. NaN or infinite inputs are refused unless
    ``allow_nonfinite_inputs`` is true (for models that take missing values).
    """

    source: Literal["input_example", "file"] = "input_example"
    path: str | None = None
    rows: int = Field(4096, ge=1)
    batch_rows: int = Field(1024, ge=1)
    target: str | None = Field(None, min_length=1)
    min_rows: int = Field(DEFAULT_MIN_GOLDEN_ROWS, ge=1)
    #: NaN/Inf in golden inputs are refused unless the model takes missing values (tree ensembles)
    allow_nonfinite_inputs: bool = False

    @model_validator(mode="after")
    def _path_when_file(self) -> "GoldenSpec":
        if self.source == "file" and not self.path:
            raise ValueError("golden.path is required when golden.source is 'file' (an .npz or .parquet file)")
        if self.path and not self.path.endswith((".npz", ".parquet")):
            raise ValueError(f"golden.path {self.path!r} must end in .npz or .parquet")
        if self.target is not None and self.source != "file":
            raise ValueError(
                f"golden.target {self.target!r} names a ground-truth column, which only a golden file has; "
                "set golden.source: file and golden.path (an .npz or .parquet file holding the inputs and the target)"
            )
        if self.min_rows > self.rows:
            raise ValueError(f"golden.min_rows {self.min_rows} exceeds golden.rows {self.rows}; raise golden.rows")
        return self


class ExportSpec(_Strict):
    opset: int = Field(17, ge=9, le=23)
    tolerances: Tolerances = Tolerances()
    #: share of rows whose label outputs (integer/string classes) must agree with the native model
    min_label_agreement: float = Field(1.0, ge=0, le=1)
    simplify: bool = False
    cache: bool = True


class ShapeRange(_Strict):
    """``tensorrt.shapes.<input>``: the range of an input's non-batch dimensions in the TensorRT
    profile, each a list as long as the input's dims (the batch dimension comes from
    ``repository.max_batch_size``). Fixed dimensions repeat their size."""

    min: list[int]
    opt: list[int]
    max: list[int]

    @model_validator(mode="after")
    def _ordered(self) -> "ShapeRange":
        if not (len(self.min) == len(self.opt) == len(self.max)):
            raise ValueError(f"min {self.min}, opt {self.opt} and max {self.max} must have the same length (the input's dims)")
        if any(d < 1 for d in self.min) or any(not (a <= b <= c) for a, b, c in zip(self.min, self.opt, self.max)):
            raise ValueError(f"need 1 <= min <= opt <= max in every dimension, got min {self.min}, opt {self.opt}, max {self.max}")
        return self


class TensorRTSpec(_Strict):
    mode: Literal["off", "prefer", "require"] = "off"
    precision: Literal["fp32", "fp16", "bf16", "int8"] = "fp16"
    tolerances: Tolerances = Tolerances(default=Tolerance(atol=1e-2, rtol=1e-2))
    workspace_mb: int = Field(2048, ge=64)
    #: input name -> the profile range of its dynamic non-batch dimensions (see :class:`ShapeRange`)
    shapes: dict[str, ShapeRange] = {}


class DynamicBatching(_Strict):
    max_queue_delay_microseconds: int = Field(100, ge=0)
    preferred_batch_size: list[int] = []


def _member_source(value: str) -> str:
    if value == RELEASE:
        return value
    if not value.endswith(".onnx") or "\x00" in value:
        raise ValueError(f"a member must be 'release' or a path to an .onnx file, not {value!r}")
    return value


def _tensor_name(value: str) -> str:
    if not _TENSOR_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a tensor name (letters, digits and _, not starting with a digit)")
    return value


class CascadeSpec(_Strict):
    """``repository.cascade``: a small model first; the large one only for rows it is unsure of.

    ``small`` and ``large`` are ``release`` or a path to an .onnx file (one must be ``release``);
    a row is sure when its highest ``output`` value is at least ``threshold`` (in (0, 1]).
    Models ``<name>_small`` and ``<name>_large`` are called by the BLS router ``<name>``.
    """

    small: str = RELEASE
    large: str
    threshold: float = Field(gt=0, le=1)
    output: str = "probabilities"

    _source = field_validator("small", "large")(_member_source)
    _tensor = field_validator("output")(_tensor_name)

    @field_validator("threshold")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number in (0, 1]")
        return v

    @model_validator(mode="after")
    def _one_release(self) -> "CascadeSpec":
        if RELEASE not in (self.small, self.large):
            raise ValueError("one of repository.cascade.small or .large must be 'release' (this release's model)")
        return self

    def members(self) -> dict[str, str]:
        return {"small": self.small, "large": self.large}


class FanoutSpec(_Strict):
    """``repository.fanout``: several models asked concurrently, one output combined elementwise.

    ``members`` maps a short key (lower-case, it becomes model ``<name>_<key>``) to ``release`` or
    an .onnx path; ``combine`` is ``mean`` (default), ``max`` or ``min``.
    """

    members: dict[str, str] = Field(min_length=2, max_length=16)
    output: str = "probabilities"
    combine: Literal["mean", "max", "min"] = "mean"

    _tensor = field_validator("output")(_tensor_name)

    @field_validator("members")
    @classmethod
    def _members(cls, v: dict[str, str]) -> dict[str, str]:
        for key, source in v.items():
            if not _MEMBER_RE.fullmatch(key):
                raise ValueError(
                    f"member key {key!r} must be lower-case letters, digits and _ "
                    "(at most 31, starting with a letter): it becomes part of a model name"
                )
            _member_source(source)
        if RELEASE not in v.values():
            raise ValueError("one of repository.fanout.members must be 'release' (this release's model)")
        return v


_SHAPE_EXAMPLES = {
    "cascade": "{small: release, large: large.onnx, threshold: 0.9}",
    "fanout": "{members: {a: release, b: b.onnx}}",
}


class RepositorySpec(_Strict):
    shape: Literal["classifier", "cascade", "fanout", "single"] = "classifier"
    max_batch_size: int = Field(64, ge=0, le=1 << 20)
    instances: int = Field(1, ge=1, le=64)
    dynamic_batching: DynamicBatching | None = DynamicBatching()
    labels: list[str] | None = None
    top_k: int = Field(1, ge=1)
    preprocess: bool = False
    model_version: int | None = Field(None, ge=1)
    cascade: CascadeSpec | None = None
    fanout: FanoutSpec | None = None

    @model_validator(mode="after")
    def _block_for_shape(self) -> "RepositorySpec":
        for block in ("cascade", "fanout"):
            given = getattr(self, block) is not None
            if self.shape == block and not given:
                raise ValueError(
                    f"repository.shape is {block!r} but repository.{block} is missing; add e.g. {block}: {_SHAPE_EXAMPLES[block]}"
                )
            if given and self.shape != block:
                raise ValueError(
                    f"repository.{block} is given but repository.shape is {self.shape!r}; set shape: {block} or remove the block"
                )
        return self


class MetricGate(_Strict):
    """One quality gate on a metric of the served outputs against ground truth.

    ``threshold``, ``min_absolute_change`` and ``min_relative_change`` mean what they mean in
    MLflow's ``MetricThreshold`` (and are checked by it): the value must reach ``threshold``; the
    candidate must *improve* on the champion by at least the absolute / relative change.
    ``max_absolute_drop`` and ``max_relative_drop`` bound how much *worse* than the champion the
    candidate may be (MLflow's thresholds cannot say that). ``greater_is_better`` is known for
    every metric; giving it is optional and must agree.
    """

    threshold: float | None = None
    min_absolute_change: float | None = Field(None, gt=0)
    min_relative_change: float | None = Field(None, ge=0, le=1)
    max_absolute_drop: float | None = Field(None, ge=0)
    max_relative_drop: float | None = Field(None, ge=0)
    greater_is_better: bool | None = None

    @field_validator("threshold", "min_absolute_change", "min_relative_change", "max_absolute_drop", "max_relative_drop")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @model_validator(mode="after")
    def _something(self) -> "MetricGate":
        if all(getattr(self, f) is None for f in ("threshold", "min_absolute_change", "min_relative_change",
                                                   "max_absolute_drop", "max_relative_drop")):
            raise ValueError("a quality gate needs at least one of threshold, min_absolute_change, min_relative_change, "
                             "max_absolute_drop, max_relative_drop (or null to turn a default gate off)")
        return self

    @property
    def change_gated(self) -> bool:
        """Whether it compares with the champion (so needs one)."""
        return any(getattr(self, f) is not None for f in ("min_absolute_change", "min_relative_change",
                                                           "max_absolute_drop", "max_relative_drop"))


#: the quality gates in force for a task when ``canary.quality`` does not name the metric:
#: no more than one point of accuracy lost against production; RMSE no more than 5% worse
DEFAULT_QUALITY_GATES: dict[str, dict[str, MetricGate]] = {
    "classification": {"accuracy": MetricGate(max_absolute_drop=0.01)},
    "regression": {"rmse": MetricGate(max_relative_drop=0.05)},
}


class ChampionGates(_Strict):
    """``canary.champion``: how alike the candidate and the production champion must answer (no ground truth needed).

    ``min_agreement``: the share of rows whose top-1 label equals the champion's (default 0.9).
    ``max_psi``: the population stability index between the two models' predicted class
    frequencies (default 0.25, the usual "significant shift" mark). ``max_ks``: for numeric
    predictions (regressors), the two-sample Kolmogorov-Smirnov statistic (default 0.2).
    """

    min_agreement: float = Field(0.9, ge=0, le=1)
    max_psi: float = Field(0.25, ge=0)
    max_ks: float = Field(0.2, ge=0, le=1)


class LoadSpec(_Strict):
    """``canary.load``: the load phase after the correctness replay, measured as perf_analyzer measures.

    ``concurrency`` requests of ``batch_rows`` golden rows are kept in flight; a ``warmup_s``
    warm-up is discarded; windows of ``window_s`` run until the last ``stable_windows`` agree on
    p50 and p99 within ``stability`` (relative) or ``budget_s`` of measuring is spent. Candidate
    and champion alternate window by window. Gates: any request error; the candidate's p99 at most
    ``max_p99_ratio`` x the champion's; its throughput at least ``min_throughput_ratio`` x the
    champion's; ``canary.p99_ms`` (an absolute SLO) when set.
    """

    enabled: bool = True
    concurrency: int = Field(4, ge=1, le=256)
    batch_rows: int = Field(16, ge=1)
    warmup_s: float = Field(1.0, ge=0, le=600)
    window_s: float = Field(1.0, gt=0, le=600)
    stable_windows: int = Field(3, ge=2, le=20)
    stability: float = Field(0.1, gt=0, le=1)
    budget_s: float = Field(20.0, gt=0, le=3600)
    request_timeout_s: float = Field(30.0, gt=0)
    max_p99_ratio: float = Field(1.25, gt=0)
    min_throughput_ratio: float = Field(0.8, gt=0)


class TuneSpec(_Strict):
    """``canary.tune``: search a serving configuration for the release's leaf models on the canary.

    Off by default. Trials cover ``instances`` x (no dynamic batching, or dynamic batching with each
    of ``max_queue_delay_us`` and ``preferred_batch_sizes``), each measured for ``trial_s`` under
    the load phase's concurrency and batch size, within ``budget_s``. The fastest trial whose p99
    meets the SLO (``canary.p99_ms``) and the champion ratio is written into the release's
    config.pbtxt (re-linted), then confirmed against the template's own configuration; the trials
    are recorded in the report and the manifest.
    """

    enabled: bool = False
    budget_s: float = Field(90.0, gt=0, le=3600)
    trial_s: float = Field(1.5, gt=0, le=600)
    instances: list[int] = Field([1, 2], min_length=1)
    dynamic_batching: list[bool] = Field([False, True], min_length=1)
    max_queue_delay_us: list[int] = Field([100, 2000], min_length=1)
    preferred_batch_sizes: list[list[int]] = Field([[]], min_length=1)

    @field_validator("instances")
    @classmethod
    def _instances(cls, v: list[int]) -> list[int]:
        if any(i < 1 or i > 64 for i in v):
            raise ValueError(f"instance counts must be 1..64, got {v}")
        return v


class CanarySpec(_Strict):
    """``canary``: how the candidate is served and judged.

    ``tolerances`` / ``min_label_agreement``: parity of the served outputs with the native model.
    ``quality``: gates on ground truth, metric name -> :class:`MetricGate` (null turns a default
    off), merged over :data:`DEFAULT_QUALITY_GATES`. ``champion``: :class:`ChampionGates`.
    ``concurrency``, ``batch_rows``: the correctness replay; ``load``: the load phase
    (:class:`LoadSpec`); ``p99_ms``: an absolute latency SLO on the load phase's p99; ``tune``:
    :class:`TuneSpec`; ``expectations``: the great-expectations suite over the outputs.
    """

    tolerances: Tolerances = Tolerances()
    min_label_agreement: float = Field(1.0, ge=0, le=1)
    concurrency: int = Field(4, ge=1, le=256)
    batch_rows: int = Field(32, ge=1)
    p99_ms: float | None = Field(None, gt=0)
    expectations: bool = True
    ready_timeout_s: float = Field(60, gt=0)
    quality: dict[str, MetricGate | None] = {}
    champion: ChampionGates = ChampionGates()
    load: LoadSpec = LoadSpec()
    tune: TuneSpec = TuneSpec()

    @field_validator("quality")
    @classmethod
    def _known_metrics(cls, v: dict[str, MetricGate | None]) -> dict[str, MetricGate | None]:
        from .metrics import METRICS

        for name, gate in v.items():
            metric = METRICS.get(name)
            if metric is None:
                raise ValueError(f"canary.quality.{name} is not a metric; valid: {', '.join(METRICS)}")
            if gate is not None and gate.greater_is_better is not None and gate.greater_is_better != metric.greater_is_better:
                raise ValueError(
                    f"canary.quality.{name}.greater_is_better is {gate.greater_is_better} but for {name} "
                    f"{'greater' if metric.greater_is_better else 'lower'} is better; leave greater_is_better out"
                )
        return v

    def quality_gates(self, task: str) -> dict[str, MetricGate]:
        """The gates in force for ``classification`` or ``regression``: defaults, then the spec's."""
        from .metrics import METRICS

        gates = dict(DEFAULT_QUALITY_GATES.get(task, {}))
        for name, gate in self.quality.items():
            if METRICS[name].task != task:
                continue
            if gate is None:
                gates.pop(name, None)
            else:
                gates[name] = gate
        return gates


class PromoteSpec(_Strict):
    store: str = "s3://model-store/releases"
    channel: str = "production"
    mlflow_alias: str | None = "production"
    #: acknowledges an interface break against the production champion: the reason, recorded in the manifest
    breaking_change: str | None = Field(None, min_length=1)

    @field_validator("mlflow_alias")
    @classmethod
    def _alias(cls, v: str | None) -> str | None:
        if v is not None and not names.is_alias(v):
            raise ValueError(f"promote.mlflow_alias {v!r} is not a valid MLflow alias (letters, digits, _ and -)")
        return v

    @field_validator("store")
    @classmethod
    def _store_uri(cls, v: str) -> str:
        if not re.fullmatch(r"(s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/[^\n]*)?|file:///[^\n]+)", v):
            raise ValueError(
                f"promote.store {v!r} is not a store URI; valid: s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH"
            )
        return v.rstrip("/")

    @field_validator("channel")
    @classmethod
    def _channel(cls, v: str) -> str:
        if not names.is_name(v):
            raise ValueError(f"promote.channel {v!r} must be letters, digits, _ and -, starting with a letter")
        return v


_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,\-?LW#]+")
_DURATION = re.compile(r"([1-9][0-9]{0,5})([smhd])")


def check_schedule(value: str) -> str:
    """A cron expression (5 fields), an Airflow preset (``@daily``...) or a duration (``30m``, ``6h``, ``1d``)."""
    fields = value.split()
    if value in _PRESETS or _DURATION.fullmatch(value) or (len(fields) == 5 and all(_CRON_FIELD.fullmatch(f) for f in fields)):
        return value
    raise ValueError(
        f"schedule {value!r} is not a cron expression (5 fields, e.g. '0 6 * * *'), a preset "
        f"({', '.join(_PRESETS)}) or a duration (a number and s, m, h or d, e.g. '30m')"
    )


def schedule_value(value: str | None):  # -> str | timedelta | None
    """What Airflow's ``schedule=`` takes for a spec's schedule: the cron or preset string, or a timedelta."""
    from datetime import timedelta

    if value is None:
        return None
    m = _DURATION.fullmatch(value)
    if m is None:
        return value
    return timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m.group(2)]: int(m.group(1))})


class ReleaseSpec(_Strict):
    """A validated release spec. Build with :func:`load_spec` or :func:`parse_spec`."""

    name: str
    model: ModelRef
    #: when the spec's scheduled DAG (``model_release__<name>``) looks for a new candidate: a cron
    #: expression, an Airflow preset or a duration; None: that DAG runs only when triggered
    schedule: str | None = None
    golden: GoldenSpec = GoldenSpec()
    export: ExportSpec = ExportSpec()
    tensorrt: TensorRTSpec = TensorRTSpec()
    repository: RepositorySpec = RepositorySpec()
    canary: CanarySpec = CanarySpec()
    promote: PromoteSpec = PromoteSpec()
    #: where the spec was read from (for resolving relative paths and naming it in messages);
    #: set by load_spec, not part of the YAML
    base_dir: str | None = None
    source: str | None = None

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str | None) -> str | None:
        return None if v is None else check_schedule(v.strip())

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not names.is_name(v):
            raise ValueError(
                f"name {v!r} must start with a letter and hold only letters, digits, _ and - (at most 64): "
                "it becomes a Triton model name and a folder name"
            )
        return v

    @property
    def where(self) -> str:
        """How to name this spec in a message: its file, or its name when it came from a mapping."""
        return self.source or f"the release spec {self.name!r}"

    def resolve_path(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() or self.base_dir is None else Path(self.base_dir) / p


def _format_errors(origin: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {loc!r}; check its spelling against the spec format in model_release/spec.py"
        elif "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict):
            msg = f"{msg} (got {err['input']!r})"
        lines.append(f"{loc}: {msg}")
    return f"release spec {origin} is invalid: " + "; ".join(lines)


def parse_spec(
    data: Any, *, origin: str = "<dict>", base_dir: str | None = None, source: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> ReleaseSpec:
    """Validate a spec given as a mapping, applying dotted ``overrides`` (``model.alias``) first."""
    if not isinstance(data, dict):
        raise SpecError(f"release spec {origin} must be a YAML mapping at the top level, got {type(data).__name__}")
    data = dict(data)
    for dotted, value in (overrides or {}).items():
        _set_dotted(data, dotted, value)
    data.pop("base_dir", None)
    data.pop("source", None)
    if base_dir is not None:
        data["base_dir"] = base_dir
    if source is not None:
        data["source"] = source
    try:
        return ReleaseSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format_errors(origin, exc)) from None


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> ReleaseSpec:
    """Read and validate a release spec file.

    Raises:
        SpecError: the file is missing, is not YAML, or a field is invalid (each field named).
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"release spec {str(p)!r} does not exist; pass a YAML file such as releases/iris.yaml")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(f"release spec {str(p)!r} is not valid YAML: {exc}") from None
    return parse_spec(data, origin=repr(str(p)), base_dir=str(p.resolve().parent), source=str(p), overrides=overrides)


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        child = dict(child) if isinstance(child, dict) else {}
        node[key] = child
        node = child
    node[keys[-1]] = value
    if dotted == "model.alias" and value is not None:
        node.pop("version", None)
    if dotted == "model.version" and value is not None:
        node.pop("alias", None)
