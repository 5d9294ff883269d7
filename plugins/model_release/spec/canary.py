"""``canary``: how the candidate is served and judged (parity, quality and champion gates, load phase, tuning)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..safe_text import echo
from .paired import (DEFAULT_CONFIDENCE, DEFAULT_MAX_NEGATIVE_FLIPS, DEFAULT_MAX_NEGATIVE_FLIPS_PER_ERROR,
                     DEFAULT_MAX_NORM_CHANGE, DEFAULT_MIN_COSINE,
                     DEFAULT_MIN_NEIGHBOUR_AGREEMENT, DEFAULT_MIN_RETRIEVAL, CalibrationGates, ClassGates)
from .strict import Tolerances, _Strict

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
    """``canary.champion``: how alike the candidate and the production champion must answer.

    ``max_negative_flips``: with ground truth, the share of golden rows the champion got right that
    the candidate may get wrong (default 0.05; null: off), or ``max_negative_flips_per_error`` times
    the champion's error rate on those rows where that is more (default 1.0; null: the 5% alone). While that gate judges, agreement and PSI
    are reported, not gated: a better model may disagree with the champion where it is right.
    Without ground truth (or with the flips gate off): ``min_agreement``, the share of rows whose
    top-1 label equals the champion's (default 0.9); ``max_psi``, the population stability index
    between the two models' predicted class frequencies (default 0.25, the usual "significant
    shift" mark). ``max_ks``: for numeric predictions (regressors), the two-sample
    Kolmogorov-Smirnov statistic (default 0.2).
    """

    min_agreement: float = Field(0.9, ge=0, le=1)
    max_psi: float = Field(0.25, ge=0)
    max_ks: float = Field(0.2, ge=0, le=1)
    max_negative_flips: float | None = Field(DEFAULT_MAX_NEGATIVE_FLIPS, ge=0, le=1)
    max_negative_flips_per_error: float | None = Field(DEFAULT_MAX_NEGATIVE_FLIPS_PER_ERROR, ge=0, description=(
        "The negative flips allowed as a multiple of the champion's error rate on the golden rows, where that is above "
        "max_negative_flips (null: max_negative_flips alone): a retrain from a new seed churns on the rows hard for both "
        "models, and a weaker champion has more of them."))


class EmbeddingGates(_Strict):
    """``canary.embedding``: an embedding model's vectors against the champion's, row by row on the golden rows.

    The index a team built from the champion's vectors keeps answering only if the candidate's
    vectors live in the same space: ``min_cosine`` (the mean cosine of each row's two vectors),
    ``min_retrieval`` (the share of rows whose candidate vector finds its own row's champion vector
    among the 10 nearest of all the champion's) and ``max_norm_change`` gate that. ``reindex: true`` says the
    index will be rebuilt from the candidate: those three are then reported, not gated, and only the
    shape of the space is (``min_neighbour_agreement``: the rows whose nearest golden neighbour is
    the same row under both models, which a rotation keeps and a collapse loses).
    """

    reindex: bool = Field(False, description=(
        "true acknowledges a re-index: the candidate's vectors may leave the champion's space (a retrain from a new "
        "seed), so cosine, retrieval and norm change are reported, not gated; neighbour agreement still is."))
    min_cosine: float | None = Field(DEFAULT_MIN_COSINE, ge=-1, le=1, description=(
        "The lowest mean cosine similarity between each golden row's candidate and champion vectors (null: off); "
        "below it the champion's index no longer matches the candidate's queries."))
    min_retrieval: float | None = Field(DEFAULT_MIN_RETRIEVAL, ge=0, le=1, description=(
        "The lowest share of golden rows whose own champion vector is among the 10 nearest champion vectors to their "
        "candidate vector (null: off): a query against the old index still finds its row."))
    max_norm_change: float | None = Field(DEFAULT_MAX_NORM_CHANGE, ge=0, description=(
        "The largest relative change of the median vector norm against the champion's (null: off): dot-product "
        "scores and thresholds tuned on the champion shift with it."))
    min_neighbour_agreement: float | None = Field(DEFAULT_MIN_NEIGHBOUR_AGREEMENT, ge=0, le=1, description=(
        "The lowest share of golden rows whose nearest other golden row is the same under both models (null: off); "
        "gated with or without a re-index: a collapsed or scrambled space loses its neighbours."))


class LoadSpec(_Strict):
    """``canary.load``: the load phase after the correctness replay, measured as perf_analyzer measures.

    ``concurrency`` requests of ``batch_rows`` golden rows are kept in flight; a ``warmup_s``
    warm-up is discarded; windows of ``window_s`` run until the last ``stable_windows`` agree on
    p50 and p99 within ``stability`` (relative) or ``budget_s`` of measuring is spent. Candidate
    and champion alternate window by window. Gates: any request error; the candidate's p99 at most
    ``max_p99_ratio`` x the champion's; its throughput at least ``min_throughput_ratio`` x the
    champion's; ``canary.p99_ms`` (an absolute SLO) when set.

    ``when_blocked``: what happens when the correctness replay has already blocked the release (a gate
    on the served outputs failed, decided: parity, contract, ground-truth quality, flips, classes).
    ``skip`` (the default): tuning and the load phase do not run, since nothing measured under load
    can unblock it, and their gates say so; the canary says no in the time its replay takes.
    ``measure``: they run anyway, for the latency figures of a release that is blocked already.
    """

    enabled: bool = True
    when_blocked: Literal["skip", "measure"] = "skip"
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

    ``reuse_days``: when the served champion's setting was measured at most this many days ago, by a
    search over the whole grid, for a release of the same shape (the same tuning fingerprint: its
    leaf models' graphs without their weights, every other file of its models, this grid, the load
    phase's concurrency and batch size, the latency limits and the canary server), it is carried
    instead of searched again (:mod:`~model_release.canary.measure.carry`): a retrained
    model of one architecture costs what the last one did, and its setting does not flap with the
    canary's noise from release to release. The load phase still measures the candidate under it
    against the champion. 0 searches on every release.
    """

    enabled: bool = False
    budget_s: float = Field(90.0, gt=0, le=3600)
    trial_s: float = Field(1.5, gt=0, le=600)
    instances: list[int] = Field([1, 2], min_length=1)
    dynamic_batching: list[bool] = Field([False, True], min_length=1)
    max_queue_delay_us: list[int] = Field([100, 2000], min_length=1)
    preferred_batch_sizes: list[list[int]] = Field([[]], min_length=1)
    reuse_days: float = Field(7.0, ge=0, le=3650)

    @field_validator("instances")
    @classmethod
    def _instances(cls, v: list[int]) -> list[int]:
        if any(i < 1 or i > 64 for i in v):
            raise ValueError(f"instance counts must be 1..64, got {v}")
        return v


class InconclusiveSpec(_Strict):
    """``canary.inconclusive``: what an Airflow run does when the canary cannot decide.

    A canary whose gates did not fail but could not all decide (an interval over the window pairs
    that straddles its limit) is *inconclusive*: nothing is promoted or rejected. The canary task
    then tries again later, up to ``retries`` times, ``retry_delay_s`` apart (Airflow's reschedule:
    the canary's pool slot is freed meanwhile, and no try of the task is spent), so that a quieter
    canary may decide. After the last, the run fails inconclusive and the model version stays open
    in the channel's ledger for the schedule's next run. The CLI does not retry: it exits 5.
    """

    retries: int = Field(2, ge=0, le=20)
    retry_delay_s: float = Field(600.0, ge=0, le=86_400)


class CanarySpec(_Strict):
    """``canary``: how the candidate is served and judged.

    ``tolerances`` / ``min_label_agreement``: parity of the served outputs with the native model.
    ``quality``: gates on ground truth, metric name -> :class:`MetricGate` (null turns a default
    off), merged over :data:`DEFAULT_QUALITY_GATES`. ``champion``: :class:`ChampionGates`.
    ``concurrency``, ``batch_rows``: the correctness replay; ``load``: the load phase
    (:class:`LoadSpec`); ``p99_ms``: an absolute latency SLO on the load phase's p99; ``tune``:
    :class:`TuneSpec`; ``expectations``: the great-expectations suite over the outputs, run by
    ``expectations_engine``: ``native`` (great-expectations' semantics in numpy, no import) or
    ``great_expectations`` (the library itself, seconds of import per process).
    ``confidence``: of every bound the paired gates on ground truth and the latency ratios decide on
    (in (0.5, 1)); a gate blocks only when the rows (or window pairs) show the candidate worse than
    allowed with this confidence. ``prove``: a paired gate on ground truth passes only when the rows
    also show the candidate *within* its allowed drop with that confidence; one the golden set cannot
    decide either way is inconclusive (retried as ``inconclusive`` says; the report names the rows
    that would decide it). Off by default: without it a gate blocks on evidence of harm and passes
    otherwise, and the report says when the golden set is too small to show the allowed drop.
    ``classes``: per-class gates (:class:`~.paired.ClassGates`); ``calibration``: calibration gates
    (:class:`~.paired.CalibrationGates`, off by default); ``embedding``: an embedding model's vectors
    against the champion's (:class:`EmbeddingGates`). ``inconclusive``: what a run does when the
    canary cannot decide (:class:`InconclusiveSpec`).
    """

    tolerances: Tolerances = Tolerances()
    min_label_agreement: float = Field(1.0, ge=0, le=1)
    concurrency: int = Field(4, ge=1, le=256)
    batch_rows: int = Field(32, ge=1)
    p99_ms: float | None = Field(None, gt=0)
    expectations: bool = True
    expectations_engine: Literal["native", "great_expectations"] = "native"
    ready_timeout_s: float = Field(60, gt=0)
    quality: dict[str, MetricGate | None] = {}
    champion: ChampionGates = ChampionGates()
    load: LoadSpec = LoadSpec()
    tune: TuneSpec = TuneSpec()
    confidence: float = DEFAULT_CONFIDENCE
    prove: bool = False
    classes: ClassGates = ClassGates()
    calibration: CalibrationGates = CalibrationGates()
    embedding: EmbeddingGates = Field(EmbeddingGates(), description=(
        "An embedding model's gates against the champion (repository.shape: embedding): cosine, retrieval, norm change "
        "and neighbour agreement on the golden rows, and whether a re-index is acknowledged."))
    # what a run does when the canary cannot decide (see InconclusiveSpec)
    inconclusive: InconclusiveSpec = InconclusiveSpec()

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, v: float) -> float:
        if not 0.5 < v < 1:
            raise ValueError(f"{v:g} is not between 0.5 and 1 (both excluded); give e.g. 0.95 for 95% confidence")
        return v

    @field_validator("quality")
    @classmethod
    def _known_metrics(cls, v: dict[str, MetricGate | None]) -> dict[str, MetricGate | None]:
        from ..model.metrics import METRICS

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
        from ..model.metrics import METRICS

        gates = dict(DEFAULT_QUALITY_GATES.get(task, {}))
        for name, gate in self.quality.items():
            if METRICS[name].task != task:
                continue
            if gate is None:
                gates.pop(name, None)
            else:
                gates[name] = gate
        return gates

