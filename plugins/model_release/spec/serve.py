"""``serve``: how a promoted release reaches the serving Tritons; ``serve.watch``, the watch after each wave.

The fleet itself (servers, their repositories, credentials) is never in a spec: it is declared
once per deployment (Airflow connections and a fleet list per channel, or the local stack's fleet
file). The spec says only how this release is rolled out and watched::

    serve:
      rollout:                 # the roll-out: a plan the serving agents follow, step by step
        enabled: true          # the release DAG rolls out after promotion (`rollout: false` is short for this)
        steps: [{servers: 1}, {percent: 10}, {percent: 50}, {percent: 100, bake_s: 0}]
        swap: side_by_side     # or in_place, for a model that needs more than half a server's memory
      warmup:
        requests: 3            # probe requests straight to each new version before the switch
        factor: 20             # refuse the switch when the first is slower than canary p99 x factor
      watch: {...}             # the rules after each wave (below)

``serve.watch`` holds the rules the watch (:mod:`model_release.serve.watch`) applies after each roll-out wave.

A wave is watched for ``bake_s`` seconds, one measurement every ``interval_s``. A measurement
covers one interval and is judged only when the new release answered at least ``min_requests``
requests of user traffic in it (the watch's own probe requests do not count as traffic); below
that it is inconclusive. Each figure has a :class:`WatchLimit`: an absolute ceiling, a ratio to the old
release's figure in the same interval, or both (the lower applies). ``failures`` failing
measurements roll the wave back; a wave passes once ``bake_s`` has elapsed, its last ``settle``
measurements were judged and passed, and the bake window held at least ``min_requests`` requests.
Anything else holds the wave and the watch goes on, up to ``budget_s`` from the wave's start: then
it stops and asks a person. Silence never promotes.

The old release's figures come from the servers still serving it; in the last wave, where none is
left, from the baseline the roll-out passes (the figures of the earlier waves or the canary).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .strict import _Strict

#: the figures the watch judges, in the order its messages list them
ERROR_RATE = "error rate"
PROBE_ERROR_RATE = "probe error rate"
SIGNAL_ERROR_RATE = "signal error rate"
MEAN_REQUEST = "mean request time"
MEAN_QUEUE = "mean queue time"
P99 = "p99"
FIGURES = (ERROR_RATE, PROBE_ERROR_RATE, SIGNAL_ERROR_RATE, MEAN_REQUEST, MEAN_QUEUE, P99)
#: figures that are shares (printed as percentages), the others are microseconds
RATES = (ERROR_RATE, PROBE_ERROR_RATE, SIGNAL_ERROR_RATE)


class WatchLimit(_Strict):
    """A ceiling on one figure of the new release.

    ``absolute``: the figure may not exceed it (a share for error rates, microseconds for times).
    ``ratio``: the figure may not exceed ``ratio`` x the old release's figure, where the old figure
    is taken as at least ``floor`` (so that an old error rate of 0.0% or a 40 us mean does not turn
    any noise into a failure). With both set the lower ceiling applies; a figure exactly at its
    ceiling passes. A ratio needs an old figure: without one only ``absolute`` applies.
    """

    absolute: float | None = Field(None, ge=0, description="The ceiling the new release's figure may not exceed (a "
                                                           "share for error rates, microseconds for times).")
    ratio: float | None = Field(None, ge=1, description="The ceiling as a multiple of the old release's figure in the "
                                                        "same interval (the lower of the two ceilings applies).")
    floor: float = Field(0.0, ge=0, description="The old figure is taken as at least this, so that an old 0.0% error "
                                                "rate or a 40 us mean does not turn noise into a failure.")

    def ceiling(self, old: float | None) -> tuple[float | None, str]:
        """The ceiling for the new figure given the old release's, and how it was formed.

        Returns:
            ``(ceiling, basis)``: ``ceiling`` None when no limit applies; ``basis`` one of
            ``absolute``, ``ratio``, ``none``.
        """
        by_ratio = self.ratio * max(old, self.floor) if self.ratio is not None and old is not None else None
        if by_ratio is not None and (self.absolute is None or by_ratio < self.absolute):
            return by_ratio, "ratio"
        if self.absolute is not None:
            return self.absolute, "absolute"
        return None, "none"


def _error_limit() -> WatchLimit:
    # at most double the old release's rate, counted from 0.5% (so 0.0% -> 1%), and never above 5%
    return WatchLimit(absolute=0.05, ratio=2.0, floor=0.005)


def _time_limit() -> WatchLimit:
    # 1.5 x the old release's mean, counted from 1 ms so that sub-millisecond noise is no failure
    return WatchLimit(ratio=1.5, floor=1000.0)


def _p99_limit() -> WatchLimit:
    # 1.5 x the old release's p99, counted from 5 ms: one server's tail under shared load moves 2x
    # at a few milliseconds (measured here with the same model as both releases)
    return WatchLimit(ratio=1.5, floor=5000.0)


class ProbeSpec(_Strict):
    """``serve.watch.probe``: requests the watch sends itself, so that an error response is seen.

    Triton counts a python step that returns an error response as a success (server#7713), so a
    failing BLS step never shows in ``nv_inference_request_failure``. With ``rows`` set (a JSON or
    CSV file of input rows, production-like: the value ranges the golden set lacks), the watch
    sends ``requests`` requests to every server each interval, one row each in turn, with a
    ``timeout_s`` each; their error rate is judged as ``probe error rate``.
    """

    rows: str | None = Field(None, min_length=1, description="A JSON file of production-like request bodies (relative "
                                                             "to the spec) the watch sends itself: how a failing BLS "
                                                             "step is seen, as Triton counts its error as a success.")
    requests: int = Field(4, ge=1, le=64, description="Probe requests per server and interval.")
    timeout_s: float = Field(5.0, gt=0, le=60, description="Seconds a probe request may take before it counts as failed.")


class WatchSpec(_Strict):
    """``serve.watch``: how long to watch each wave, how often, and which figures roll it back.

    Defaults, and why:
        enabled: True; a roll-out without a watch promotes whatever the canary passed.
        bake_s: 120 s per wave: two of Triton's 60 s p99 summary windows, so the p99 judged last
            covers only the new release's own traffic.
        interval_s: 10 s; short enough to roll back within one bake time after ``failures``.
        min_requests: 20 requests of user traffic per interval before a measurement is judged: one
            error in fewer would already be 5%.
        failures: 2 failing measurements roll back (one may be a spike, two in a bake are not).
        settle: the last 2 measurements must be judged and pass; a figure still moving holds.
        budget_s: 600 s per wave; past it an inconclusive watch stops and asks a person.
        error_rate: at most 2 x the old release's rate, counted from 0.5% (an old 0.0% allows 1%,
            an old 2% allows 4%): a new release is judged against what production already does;
            and never above 5%, whatever the old release does.
        mean_request_us / mean_queue_us: at most 1.5 x the old release's (counted from 1 ms).
        p99_us: at most 1.5 x the old release's highest server p99 (counted from 5 ms: a tail of a
            few milliseconds moves 2x between two servers of one release under shared load).
        error_signal: the name of a counter in the servers' metrics (a custom metric a python step
            increments, labels ``model`` and ``version``) counting errors the step answered as
            successes; judged as ``signal error rate`` over the entry model's requests.
    """

    enabled: bool = Field(True, description="Watch each roll-out wave on the servers' own metrics and roll back on "
                                            "a failure; off where no traffic flows (each wave would hold inconclusive).")
    bake_s: float = Field(120.0, gt=0, le=86400, description="Seconds each wave is watched.")
    interval_s: float = Field(10.0, gt=0, le=3600, description="Seconds one measurement covers.")
    min_requests: int = Field(20, ge=1, description="User requests an interval needs before its measurement is judged "
                                                    "(probe requests do not count).")
    failures: int = Field(2, ge=1, le=100, description="Failing measurements that roll the wave back.")
    settle: int = Field(2, ge=1, le=100, description="The last this many measurements must pass before a wave passes.")
    budget_s: float = Field(600.0, gt=0, le=7 * 86400, description="Past this, an unjudged wave stops and asks a "
                                                                   "person: silence never promotes.")
    error_rate: WatchLimit = Field(default_factory=_error_limit, description="The ceiling on the new release's share "
                                                                             "of failed requests.")
    mean_request_us: WatchLimit = Field(default_factory=_time_limit, description="The ceiling on its mean request time, "
                                                                                 "in microseconds.")
    mean_queue_us: WatchLimit = Field(default_factory=_time_limit, description="The ceiling on its mean queue time, "
                                                                               "in microseconds.")
    p99_us: WatchLimit = Field(default_factory=_p99_limit, description="The ceiling on its p99 from Triton's summaries "
                                                                       "(--metrics-config=summary_latencies=true).")
    error_signal: str | None = Field(None, pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$",
                                     description="A custom counter a python step increments on an error, watched as a "
                                                 "share of requests.")
    probe: ProbeSpec = Field(default_factory=ProbeSpec, description="Requests the watch sends itself to each server.")

    @model_validator(mode="after")
    def _consistent(self) -> "WatchSpec":
        if self.interval_s > self.bake_s:
            raise ValueError(
                f"interval_s {self.interval_s:g} is longer than bake_s {self.bake_s:g}: no measurement would end "
                "within the bake time; make interval_s at most bake_s"
            )
        if self.budget_s < self.bake_s:
            raise ValueError(
                f"budget_s {self.budget_s:g} is shorter than bake_s {self.bake_s:g}: the watch would stop before "
                "the bake time; make budget_s at least bake_s"
            )
        if self.settle * self.interval_s > self.budget_s:
            raise ValueError(
                f"settle {self.settle} x interval_s {self.interval_s:g} exceeds budget_s {self.budget_s:g}: "
                "no wave could ever settle; lower settle or raise budget_s"
            )
        return self

    def limit(self, figure: str) -> WatchLimit:
        """The limit of one of :data:`FIGURES` (the three error rates share ``error_rate``)."""
        if figure in RATES:
            return self.error_rate
        return {MEAN_REQUEST: self.mean_request_us, MEAN_QUEUE: self.mean_queue_us, P99: self.p99_us}[figure]


class WarmupSpec(_Strict):
    """``serve.warmup``: requests sent straight to each new version before the entry model switches.

    Defaults, and why: 3 requests (the first pays the lazy initialisation; two more show it is over);
    a factor of 20 over the canary's p99 (a first request well past that is a model that was not warmed
    up, Triton server#3473, not noise).
    """

    requests: int = Field(3, ge=0, le=1000)
    factor: float = Field(20.0, gt=1.0, le=10_000.0)


class StepSpec(_Strict):
    """One step of a roll-out: how many servers serve the new release once it is done, and its limits.

    Exactly one of ``servers`` and ``percent``; the servers of a step are the earlier steps' and as many
    more as it names (a step that adds none is skipped and the record says so).
    """

    servers: int | None = Field(None, ge=1, description="serve the new release on this many servers (at most the fleet) once the step is done")
    percent: float | None = Field(None, gt=0, le=100, description="serve the new release on this share of the fleet (rounded up, at least one server) once the step is done")
    bake_s: float | None = Field(None, ge=0, le=86400, description="seconds the step's servers serve before the next step; None: serve.watch.bake_s when the step is watched, else none")
    deadline_s: float | None = Field(None, gt=0, le=86400, description="seconds the step's servers have to report the new release loaded and warm; None: serve.rollout.deadline_s")
    max_failures: int = Field(0, ge=0, description="how many of the step's new servers may fail to load it (or stay silent past the deadline) before the step stops; they keep the old release")
    max_failed_percent: float = Field(0.0, ge=0, le=100, description="the same budget as a share of the step's new servers; the larger of the two applies")

    @model_validator(mode="after")
    def _one_size(self) -> "StepSpec":
        if (self.servers is None) == (self.percent is None):
            raise ValueError("a step names exactly one of servers (a count) and percent (a share of the fleet), "
                             "for example {servers: 1} or {percent: 50}")
        return self

    def budget(self, new_servers: int) -> int:
        """How many of ``new_servers`` may fail in this step."""
        return max(self.max_failures, math.floor(new_servers * self.max_failed_percent / 100))


def _default_steps() -> list[StepSpec]:
    # one server first (a bad release stops there), then the rest: the shape of the first roll-out
    return [StepSpec(servers=1), StepSpec(percent=100)]


class RolloutSpec(_Strict):
    """``serve.rollout``: the plan the serving agents follow, step by step (:mod:`model_release.serve.rollout`).

    Defaults, and why: one server, then the whole fleet (a bad release meets one server first);
    side by side (the old release stays loaded, so a rollback is a re-pin); 10 minutes per step for
    the step's servers to fetch, load and warm the release; no server may fail (a release that some
    servers refuse is a release to look at).
    """

    enabled: bool = Field(True, description="the release DAG rolls the promoted release out to the channel's serving agents; false: promotion only")
    steps: list[StepSpec] = Field(default_factory=_default_steps, min_length=1, description="the steps, in order; the last must be percent: 100 so that every server is reached")
    swap: Literal["side_by_side", "in_place"] = Field("side_by_side", description="side_by_side: new and old releases loaded together (rollback re-pins); in_place: each server drains, unloads the old and loads the new (a model over half a server's memory)")
    drain_s: float = Field(10.0, gt=0, le=600, description="in place: the longest a server waits for its in-flight requests after it stops reporting ready")
    deadline_s: float = Field(600.0, gt=0, le=86400, description="seconds a step's servers have to report the new release loaded, unless the step sets its own")
    silent_after_s: float = Field(30.0, gt=0, le=3600, description="an agent whose heartbeat is older than this is not a member of the fleet: named in the record, never waited for")

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, value: Any) -> Any:
        """``rollout: true|false`` (the spec's earlier form) is ``enabled`` with every other default."""
        return {"enabled": value} if isinstance(value, bool) else value

    @field_validator("steps")
    @classmethod
    def _ends_at_the_whole_fleet(cls, steps: list[StepSpec]) -> list[StepSpec]:
        if steps[-1].percent != 100:
            raise ValueError("the last step must be {percent: 100}, so that every server of the fleet is reached; "
                             f"it is {steps[-1].model_dump(exclude_defaults=True)}")
        return steps


class ServeSpec(_Strict):
    """``serve``: the serving fleet's side of a release: the roll-out, its warm-up rule, and the watch."""

    rollout: RolloutSpec = Field(default_factory=RolloutSpec, description="how the release reaches the serving fleet: steps, swap, deadlines; `false` turns the roll-out off")
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    watch: WatchSpec = Field(default_factory=WatchSpec)
