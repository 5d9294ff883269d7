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
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from . import names
from .errors import SpecError
from .safe_text import echo

#: a cascade or fanout member that is this release's own exported model
RELEASE = "release"
_MEMBER_RE = re.compile(r"[a-z][a-z0-9_]{0,30}")
_TENSOR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _takes_number(annotation: Any) -> bool:
    """Whether a field's type is a number (``int``, ``float``, or one of them or None)."""
    if annotation in (int, float):
        return True
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(a in (int, float) for a in typing.get_args(annotation))
    return False


class _Strict(BaseModel):
    # NaN and infinity are never a sensible setting (an infinite tolerance passes everything)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """YAML reads ``true`` as a boolean, which pydantic would take as 1: refuse it where a number goes."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _takes_number(field.annotation):
            raise ValueError(f"{str(value).lower()} is a boolean, not a number; give a number")
        return value


class Tolerance(_Strict):
    atol: float = Field(1e-5, ge=0)
    rtol: float = Field(1e-4, ge=0)


class Tolerances(_Strict):
    """Per-output tolerances; ``default`` applies to outputs not named.

    Every other key names an output (its Triton name or its name in the model) and maps to
    ``{atol, rtol}``; a key that names no output of the model is refused at export.
    """

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)
    __pydantic_extra__: dict[str, Tolerance] = Field(init=False)  # type: ignore[assignment]
    default: Tolerance = Tolerance()

    def for_output(self, name: str) -> Tolerance:
        return (self.model_extra or {}).get(name, self.default)

    def named(self) -> dict[str, Tolerance]:
        return dict(self.model_extra or {})


#: the highest model version the registry stores (MLflow keeps versions as 32-bit integers)
MAX_MODEL_VERSION = 2**31 - 1


class ModelRef(_Strict):
    name: str
    alias: str | None = None
    version: int | None = Field(None, ge=1, le=MAX_MODEL_VERSION)

    @field_validator("name")
    @classmethod
    def _registered_name(cls, v: str) -> str:
        if not names.is_registered_model(v):
            raise ValueError(f"{echo(v)} is not a registered model name: {names.REGISTERED_MODEL_RULE}")
        return v

    @field_validator("alias")
    @classmethod
    def _alias(cls, v: str | None) -> str | None:
        if v is not None and not names.is_alias(v):
            raise ValueError(f"{echo(v)} is not a valid MLflow alias (letters, digits, _ and -, starting with a letter "
                             "or _), for example candidate")
        return v

    @model_validator(mode="after")
    def _one_of(self) -> "ModelRef":
        if (self.alias is None) == (self.version is None):
            raise ValueError("give exactly one of model.alias (e.g. candidate) or model.version (e.g. 3)")
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
            raise ValueError(f"golden.path {echo(self.path)} must end in .npz or .parquet")
        if self.path and "\x00" in self.path:
            raise ValueError(f"golden.path {echo(self.path)} holds a NUL character")
        if self.target is not None and self.source != "file":
            raise ValueError(
                f"golden.target {echo(self.target)} names a ground-truth column, which only a golden file has; "
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
        raise ValueError(f"a member must be 'release' or a path to an .onnx file, not {echo(value)}")
    return value


def _tensor_name(value: str) -> str:
    if not _TENSOR_RE.fullmatch(value):
        raise ValueError(f"{echo(value)} is not a tensor name (letters, digits and _, not starting with a digit)")
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
                    f"member key {echo(key)} must be lower-case letters, digits and _ "
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
                raise ValueError(f"canary.quality.{echo(name)[1:-1]} is not a metric; valid: {', '.join(METRICS)}")
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
            raise ValueError(f"promote.mlflow_alias {echo(v)} is not a valid MLflow alias (letters, digits, _ and -)")
        return v

    @field_validator("store")
    @classmethod
    def _store_uri(cls, v: str) -> str:
        if not re.fullmatch(r"(s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/[^\n]*)?|file:///[^\n]+)", v):
            raise ValueError(
                f"promote.store {echo(v)} is not a store URI; valid: s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH"
            )
        return v.rstrip("/")

    @field_validator("channel")
    @classmethod
    def _channel(cls, v: str) -> str:
        if not names.is_name(v):
            raise ValueError(f"promote.channel {echo(v)} must be letters, digits, _ and -, starting with a letter")
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
        f"schedule {echo(value)} is not a cron expression (5 fields, e.g. '0 6 * * *'), a preset "
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
                f"name {echo(v)} must start with a letter and hold only letters, digits, _ and - (at most 64): "
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


#: how a section looks, for "must be a mapping" messages
_EXAMPLES = {"Tolerance": "{atol: 1.0e-5, rtol: 1.0e-4}"}

#: at most this many field errors are listed in one message (the count of the rest is given)
MAX_LISTED_ERRORS = 10


def _format_errors(origin: str, exc: ValidationError) -> str:
    errors = exc.errors()
    lines = []
    for err in errors[:MAX_LISTED_ERRORS]:
        loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
        loc = echo(loc, 80)[1:-1]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown field '{loc}'; check its spelling against the spec format in model_release/spec.py"
        else:
            if err["type"] == "model_type":
                example = _EXAMPLES.get(str((err.get("ctx") or {}).get("class_name")))
                msg = f"must be a mapping such as {example}" if example else "must be a mapping of its fields"
            if "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict):
                got = echo(err["input"])
                if err["type"] != "value_error" or got not in msg:  # our own messages name the value already
                    msg = f"{msg} (got {got})"
        lines.append(f"{loc}: {msg}")
    if len(errors) > MAX_LISTED_ERRORS:
        lines.append(f"and {len(errors) - MAX_LISTED_ERRORS} more errors")
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
        given = "; ".join(f"{k}={echo(v)}" for k, v in (overrides or {}).items())
        raise SpecError(_format_errors(origin, exc) + (f" (overridden: {given})" if given else "")) from None


#: a release spec is a page of YAML: larger files are refused before they are parsed
MAX_SPEC_BYTES = 1 << 20
#: how deeply a spec may nest (the deepest real spec nests 5 levels)
MAX_SPEC_DEPTH = 32
#: how many values a spec may hold once its YAML aliases are expanded (an alias "bomb" of a few
#: hundred bytes expands to billions)
MAX_SPEC_NODES = 200_000


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> ReleaseSpec:
    """Read and validate a release spec file.

    The file must be UTF-8 YAML of at most :data:`MAX_SPEC_BYTES`; a key given twice in one
    mapping, nesting deeper than :data:`MAX_SPEC_DEPTH` and aliases that expand beyond
    :data:`MAX_SPEC_NODES` values are refused before anything is built from it.

    Raises:
        SpecError: the file is missing, unreadable, not UTF-8, not YAML, or a field is invalid
            (each field named).
    """
    p = Path(path)
    where = echo(str(p), 200)
    text = _read_spec_text(p, where)
    data = parse_yaml(text, f"release spec {where}")
    return parse_spec(data, origin=where, base_dir=str(p.resolve().parent), source=str(p), overrides=overrides)


def _read_spec_text(p: Path, where: str) -> str:
    if not p.exists():
        raise SpecError(f"release spec {where} does not exist; pass a YAML file such as releases/iris.yaml")
    if not p.is_file():
        raise SpecError(f"release spec {where} is not a file; pass a YAML file such as releases/iris.yaml")
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"release spec {where} cannot be read ({exc.strerror or type(exc).__name__}); "
                        "check the path and its permissions") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(f"release spec {where} is larger than {MAX_SPEC_BYTES // 1024} KiB; a spec is a page of YAML: "
                        "check that this is the right file")
    if b"\x00" in raw:
        raise SpecError(f"release spec {where} is a binary file (it holds NUL bytes), not YAML text; "
                        "pass a YAML file such as releases/iris.yaml")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"release spec {where} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                        "save it as UTF-8") from None


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys and nesting deeper than :data:`MAX_SPEC_DEPTH`."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_SPEC_DEPTH:
                mark = self.peek_event().start_mark
                raise _SpecShapeError(f"it nests deeper than {MAX_SPEC_DEPTH} levels (at line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base class refuses it
                if first is None:
                    seen[key] = key_node.start_mark.line
                else:
                    lines = sorted({first + 1, key_node.start_mark.line + 1})
                    raise _SpecShapeError(
                        f"key {echo(key)} is given twice in one mapping (line {' and '.join(map(str, lines))}); "
                        "YAML would silently keep the last one: remove one of them"
                    )
        return super().construct_mapping(node, deep=deep)


class _SpecShapeError(Exception):
    """The YAML is well-formed but not a spec's shape: duplicate keys, too deep, too large."""


def _expanded_size(root: Any) -> None:
    """Refuse a composed YAML graph that is recursive, or too deep or too large once aliases expand.

    Aliases share nodes, so sizes are counted once per node (memoised) and never by expanding.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else (
            list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_SPEC_NODES:
                raise _SpecShapeError(f"its aliases expand to more than {MAX_SPEC_NODES} values (an alias bomb?)")
            if depth[key] > MAX_SPEC_DEPTH:
                raise _SpecShapeError(f"its aliases expand to nesting deeper than {MAX_SPEC_DEPTH} levels")
            continue
        if key in size:
            continue
        if key in on_path:
            raise _SpecShapeError(f"an alias refers to a mapping or list that contains it (line {node.start_mark.line + 1})")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def parse_yaml(text: str, what: str) -> Any:
    """Parse one YAML document of spec-like input safely (see :func:`load_spec` for what is refused).

    Raises:
        SpecError: ``what`` (a phrase naming the input) is not valid YAML or not a spec's shape.
    """
    loader = _SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except _SpecShapeError as exc:
        raise SpecError(f"{what} is refused: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = ", ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError(f"{what} is not valid YAML: {problem}{at}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{what} is not valid YAML: {exc}") from None
    except RecursionError:
        raise SpecError(f"{what} is refused: it nests too deeply to read") from None
    finally:
        loader.dispose()


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
