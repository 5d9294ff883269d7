"""``canary``: how the candidate is served and judged (parity, quality and champion gates, load phase, tuning)."""

from __future__ import annotations

import math
from typing import Any, Literal

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

    threshold: float | None = Field(None, description="The value the served metric must reach (MLflow's "
                                                      "MetricThreshold threshold, checked by MLflow).")
    min_absolute_change: float | None = Field(None, gt=0, description="The improvement on the champion the candidate "
                                                                      "must show, in the metric's units (MLflow's).")
    min_relative_change: float | None = Field(None, ge=0, le=1, description="The improvement on the champion the "
                                                                            "candidate must show, as a share (MLflow's).")
    max_absolute_drop: float | None = Field(None, ge=0, description="How much worse than the champion the candidate "
                                                                    "may be, in the metric's units (decided with "
                                                                    "canary.confidence on the same rows).")
    max_relative_drop: float | None = Field(None, ge=0, description="How much worse than the champion the candidate "
                                                                    "may be, as a share of the champion's value.")
    greater_is_better: bool | None = Field(None, description="Known for every metric; optional, and refused when it "
                                                             "disagrees.")

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

    min_agreement: float = Field(0.9, ge=0, le=1, description="Without ground truth: the share of rows whose top "
                                                              "label equals the champion's.")
    max_psi: float = Field(0.25, ge=0, description="Without ground truth: the population stability index of the "
                                                   "predicted class frequencies against the champion's.")
    max_ks: float = Field(0.2, ge=0, le=1, description="For numeric predictions: the two-sample Kolmogorov-Smirnov "
                                                       "statistic against the champion's.")
    max_negative_flips: float | None = Field(DEFAULT_MAX_NEGATIVE_FLIPS, ge=0, le=1,
                                             description="With ground truth: the share of rows the champion got right "
                                                         "that the candidate may get wrong (null: off).")
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


#: ``canary.load.batch_rows`` when the spec gives none and ``repository.max_batch_size`` is not smaller
DEFAULT_LOAD_BATCH_ROWS = 16


class LoadSpec(_Strict):
    """``canary.load``: the load phase after the correctness replay, measured as perf_analyzer measures.

    ``concurrency`` requests of ``batch_rows`` golden rows are kept in flight; a ``warmup_s``
    warm-up is discarded; windows of ``window_s`` run until the last ``stable_windows`` agree on
    p50 and p99 within ``stability`` (relative) or ``budget_s`` of measuring is spent. Candidate
    and champion alternate window by window. Gates: any request error; the candidate's p99 at most
    ``max_p99_ratio`` x the champion's; its throughput at least ``min_throughput_ratio`` x the
    champion's; ``canary.p99_ms`` (an absolute SLO) when set. A window runs on past ``window_s``
    until it holds ``min_requests`` requests (within the budget), so a slow model's p99 rests on
    enough of them; a ratio gate passes only on pairs of such windows.

    ``when_blocked``: what happens when the correctness replay has already blocked the release (a gate
    on the served outputs failed, decided: parity, contract, ground-truth quality, flips, classes).
    ``skip`` (the default): tuning and the load phase do not run, since nothing measured under load
    can unblock it, and their gates say so; the canary says no in the time its replay takes.
    ``measure``: they run anyway, for the latency figures of a release that is blocked already.
    """

    enabled: bool = Field(True, description="Whether the load phase runs; off, its gates are skipped saying so.")
    when_blocked: Literal["skip", "measure"] = Field(
        "skip", description="skip: no tuning or load phase once the replay blocked the release (nothing measured "
        "under load could unblock it); measure: run them anyway, for the figures.")
    concurrency: int = Field(4, ge=1, le=256, description="Requests kept in flight (closed loop), as perf_analyzer's "
                             "--concurrency-range; each has its own kept-open connection.")
    batch_rows: int = Field(DEFAULT_LOAD_BATCH_ROWS, ge=1, description="Golden rows per request, every one counted: "
                            "16, or repository.max_batch_size when that is smaller; given, at most it (Triton refuses more).")
    warmup_s: float = Field(1.0, ge=0, le=600, description="Seconds of load per model before measuring, discarded.")
    window_s: float = Field(1.0, gt=0, le=600, description="The shortest measurement window, in seconds; a window "
                            "runs on past it until it holds min_requests requests.")
    min_requests: int = Field(100, ge=1, le=1_000_000, description="The fewest requests a window's p99 rests on (fewer "
                              "and it is about the slowest request): a slow model's windows run on until they hold "
                              "this many, within budget_s; a ratio gate passes only on pairs of such windows.")
    stable_windows: int = Field(3, ge=2, le=20, description="How many last windows must agree on p50 and p99 (within "
                                "stability) to settle, as perf_analyzer's stability rule.")
    stability: float = Field(0.1, gt=0, le=1, description="The relative spread of p50 and p99 over the last "
                             "stable_windows windows that counts as settled.")
    budget_s: float = Field(20.0, gt=0, le=3600, description="Seconds of measuring (warm-up excluded) at most; while a "
                            "ratio gate cannot decide, the phase measures more window pairs up to this budget.")
    request_timeout_s: float = Field(30.0, gt=0, description="Seconds to wait for one request's answer (and to "
                                     "connect) before it counts as an error.")
    max_p99_ratio: float = Field(1.25, gt=0, description="The candidate's p99 latency under load at most this many "
                                 "times the champion's, decided from an interval over the window pairs.")
    min_throughput_ratio: float = Field(0.8, gt=0, description="The candidate's throughput under load at least this "
                                        "share of the champion's, decided from an interval over the window pairs.")


def load_rows_default(data: Any) -> Any:
    """A release spec's raw mapping with ``canary.load.batch_rows`` set to ``repository.max_batch_size`` where the
    spec gives none and the default (16) would be more than the entry model takes; anything else as it is."""
    if not isinstance(data, dict):
        return data
    repository, canary = data.get("repository"), data.get("canary", {})
    most = repository.get("max_batch_size") if isinstance(repository, dict) else None
    if isinstance(most, bool) or not isinstance(most, int) or not 0 < most < DEFAULT_LOAD_BATCH_ROWS:
        return data
    load = canary.get("load", {}) if isinstance(canary, dict) else None
    if not isinstance(load, dict) or "batch_rows" in load:
        return data
    return {**data, "canary": {**canary, "load": {**load, "batch_rows": most}}}


def batch_rows_refusal(batch_rows: int, max_batch_size: int, whose: str, fix: str = "") -> str | None:
    """Why requests of ``batch_rows`` rows cannot go to an entry model of ``max_batch_size`` (0: it does not batch), or None.

    Args:
        whose: the maximum in words (``repository.max_batch_size``, or the served entry model's).
        fix: another way out, after the first (``or raise repository.max_batch_size``).
    """
    if not 0 < max_batch_size < batch_rows:
        return None
    return (f"canary.load.batch_rows {batch_rows} is above {whose} {max_batch_size}: Triton refuses a request of more "
            f"rows than the entry model's max_batch_size, and cut to {max_batch_size} rows the load phase would count "
            f"rows it never sent. Set canary.load.batch_rows to at most {max_batch_size}{fix}")


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

    enabled: bool = Field(False, description="Search a serving configuration for the leaf models on the canary and "
                                             "ship the fastest that meets the SLO and the champion ratio.")
    budget_s: float = Field(90.0, gt=0, le=3600, description="Seconds the whole search may take.")
    trial_s: float = Field(1.5, gt=0, le=600, description="Seconds each trial is measured under the load phase's "
                                                          "concurrency and batch size.")
    instances: list[int] = Field([1, 2], min_length=1, description="Instance counts tried (1 to 64 each).")
    dynamic_batching: list[bool] = Field([False, True], min_length=1, description="Whether trials run without and/or "
                                                                                  "with Triton's dynamic batcher.")
    max_queue_delay_us: list[int] = Field([100, 2000], min_length=1, description="The dynamic batcher's queue delays "
                                                                                 "tried, in microseconds.")
    preferred_batch_sizes: list[list[int]] = Field([[]], min_length=1, description="The dynamic batcher's preferred "
                                                                                   "batch sizes tried ([] for none).")
    reuse_days: float = Field(7.0, ge=0, le=3650, description="Carry the champion's setting, searched at most this many "
                                                              "days ago for a release of the same tuning fingerprint, "
                                                              "instead of searching again; 0 searches every time.")

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

    retries: int = Field(2, ge=0, le=20, description="How many times an Airflow run's canary task tries again "
                                                     "(rescheduled, its pool slot freed) after an inconclusive canary.")
    retry_delay_s: float = Field(600.0, ge=0, le=86_400, description="Seconds between those tries, so that a quieter "
                                                                     "canary may decide.")


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

    tolerances: Tolerances = Field(Tolerances(), description="Per-output parity tolerances of the served outputs "
                                                            "against the native model on the golden rows.")
    min_label_agreement: float = Field(1.0, ge=0, le=1, description="The share of rows whose served labels must equal "
                                                                    "the native model's.")
    concurrency: int = Field(4, ge=1, le=256, description="Requests in flight while the golden rows are replayed "
                                                          "through both models.")
    batch_rows: int = Field(32, ge=1, description="Golden rows per request of that replay.")
    p99_ms: float | None = Field(None, gt=0, description="An absolute SLO on the load phase's p99, in milliseconds "
                                                         "(null: none); any request error under load fails too.")
    expectations: bool = Field(True, description="Run the expectation suite over the served outputs (no nulls, "
                                                 "probabilities in [0, 1] summing to 1, labels in the label set).")
    expectations_engine: Literal["native", "great_expectations"] = Field(
        "native", description="native: great-expectations' semantics in numpy (no import); great_expectations: the "
                              "library itself (seconds of import per process).")
    ready_timeout_s: float = Field(60, gt=0, description="Seconds the canary Triton and its models may take to be ready.")
    quality: dict[str, MetricGate | None] = Field({}, description="Metric name -> its gate on ground truth, merged over "
                                                                  "the defaults (accuracy for classifiers, rmse for "
                                                                  "regressors); null turns a default off.")
    champion: ChampionGates = Field(ChampionGates(), description="How alike the candidate and the production champion "
                                                                 "must answer.")
    load: LoadSpec = Field(LoadSpec(), description="The load phase: candidate and champion measured in alternating "
                                                   "windows on one server, and the latency ratio gates.")
    tune: TuneSpec = Field(TuneSpec(), description="The serving-configuration search on the canary (off by default).")
    confidence: float = Field(DEFAULT_CONFIDENCE, description="The confidence of every bound the paired gates and the "
                                                              "latency ratios decide on, in (0.5, 1): a gate blocks "
                                                              "only on evidence this strong.")
    prove: bool = Field(False, description="A paired gate passes only when the rows also show the candidate within its "
                                           "allowed drop; undecided is inconclusive (needs a golden set sized for it).")
    classes: ClassGates = Field(ClassGates(), description="Per-class recall and precision gates against the champion.")
    calibration: CalibrationGates = Field(CalibrationGates(), description="Calibration gates on the class scores (off "
                                                                          "unless a limit is given).")
    embedding: EmbeddingGates = Field(EmbeddingGates(), description=(
        "An embedding model's gates against the champion (repository.shape: embedding): cosine, retrieval, norm change "
        "and neighbour agreement on the golden rows, and whether a re-index is acknowledged."))
    # what a run does when the canary cannot decide (see InconclusiveSpec)
    inconclusive: InconclusiveSpec = Field(InconclusiveSpec(), description="What an Airflow run does when the canary "
                                                                           "cannot decide.")

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

