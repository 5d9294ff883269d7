"""Judging one measurement of a wave: the new release's figures against their limits.

A measurement is one interval's figures of the servers on the new release and of those still on
the old one (:mod:`.figures`). Its status:

- ``fail``: a judged figure is over its ceiling (:meth:`model_release.spec.serve.WatchLimit.ceiling`); the sentence says
  the figure, the new value, the old one and the limit: ``error rate 4.1% against 0.0%, limit 1%``.
- ``inconclusive``: a server on the new release reports no figures for it, the new release had
  less than ``min_requests`` requests of user traffic in the interval, or a figure with a limit
  could not be read (a p99 missing from a server's summary).
  Probe requests are judged even then: they are the watch's own traffic.
- ``pass``: every figure with a ceiling was judged and is at or under it.

The old release's figure is the same interval's on the servers still serving it when they had at
least ``min_requests`` requests, else the roll-out's baseline (earlier waves, the canary), else
none: a ratio limit then does not apply and the measurement notes it. A p99 is judged per server on
the new release against the highest p99 of a server on the old one (its 60 s windows are never
averaged).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...spec.serve import (
    ERROR_RATE, FIGURES, MEAN_QUEUE, MEAN_REQUEST, P99, PROBE_ERROR_RATE, RATES, SIGNAL_ERROR_RATE, WatchSpec,
)
from .figures import ServerInterval, Totals

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"

#: figure -> the old release's value (p99: one server's, the highest); a roll-out's baseline
Baseline = Mapping[str, float]


def show(figure: str, value: float | None) -> str:
    """A figure's value as messages print it: shares as percentages, times in milliseconds."""
    if value is None or math.isnan(value):
        return "no figure"
    if figure in RATES:
        text = f"{value * 100:.2f}".rstrip("0")
        return (text + "0" if text.endswith(".") else text) + "%"
    return f"{value / 1000:.3g} ms"


@dataclass(frozen=True)
class Check:
    """One figure judged against its ceiling (``server`` set for a per-server figure: the p99)."""

    figure: str
    new: float
    old: float | None
    ceiling: float
    basis: str
    server: str | None = None

    @property
    def passed(self) -> bool:
        return self.new <= self.ceiling

    @property
    def sentence(self) -> str:
        where = f" on {self.server}" if self.server else ""
        return f"{self.figure}{where} {show(self.figure, self.new)} against {show(self.figure, self.old)}, " \
               f"limit {show(self.figure, self.ceiling)}"

    def as_dict(self) -> dict[str, object]:
        return {"figure": self.figure, "server": self.server, "new": self.new, "old": self.old,
                "ceiling": self.ceiling, "basis": self.basis, "passed": self.passed}


@dataclass(frozen=True)
class Measurement:
    """One interval judged: its status, why, the checks and the figures per server."""

    index: int
    at_s: float
    status: str
    reason: str
    checks: tuple[Check, ...]
    notes: tuple[str, ...]
    new: tuple[ServerInterval, ...]
    old: tuple[ServerInterval, ...]
    traffic: float = field(default=0.0)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready figures of this measurement for the report."""
        return {
            "index": self.index, "at_s": round(self.at_s, 3), "status": self.status, "reason": self.reason,
            "traffic": self.traffic, "checks": [c.as_dict() for c in self.checks], "notes": list(self.notes),
            "new": [i.as_dict() for i in self.new], "old": [i.as_dict() for i in self.old],
            "counts": "means are over successful requests only (Triton's duration counters count successes)",
        }


def release_figures(t: Totals) -> dict[str, float]:
    """The release-wide figures of some servers' summed interval (only those with a denominator)."""
    out: dict[str, float] = {}
    if t.requests > 0:
        out[ERROR_RATE] = t.failures / t.requests
        if t.signal_errors is not None:
            out[SIGNAL_ERROR_RATE] = min(1.0, t.signal_errors / t.requests)
    if t.probes_sent > 0:
        out[PROBE_ERROR_RATE] = t.probe_errors / t.probes_sent
    if t.successes > 0:
        out[MEAN_REQUEST] = t.request_us / t.successes
        out[MEAN_QUEUE] = t.queue_us / t.successes
    p99s = [v for v in t.p99_us.values() if not math.isnan(v)]
    if p99s:
        out[P99] = max(p99s)
    return out


def _reference(spec: WatchSpec, old: Totals, baseline: Baseline | None) -> dict[str, float]:
    ref = dict(baseline or {})
    measured = release_figures(old)
    if old.traffic < spec.min_requests:  # too few to compare with, but the old probes are a fair figure
        measured = {k: v for k, v in measured.items() if k == PROBE_ERROR_RATE}
    ref.update(measured)
    return ref


def _check(spec: WatchSpec, figure: str, new: float, ref: dict[str, float], notes: list[str],
           server: str | None = None) -> Check | None:
    ceiling, basis = spec.limit(figure).ceiling(ref.get(figure))
    if ceiling is None:
        if spec.limit(figure).ratio is not None:
            notes.append(f"{figure}: not judged, no figure of the old release to compare with (ratio limit only)")
        return None
    return Check(figure, new, ref.get(figure), ceiling, basis, server)


def judge(
    spec: WatchSpec,
    new: Sequence[ServerInterval],
    old: Sequence[ServerInterval],
    *,
    baseline: Baseline | None = None,
    index: int = 0,
    at_s: float = 0.0,
) -> Measurement:
    """Judge one interval of a wave (see the module docstring for the rules)."""
    new_t = Totals.of(new)
    ref = _reference(spec, Totals.of(old), baseline)
    figures = release_figures(new_t)
    notes: list[str] = []
    checks: list[Check | None] = []
    if PROBE_ERROR_RATE in figures:
        checks.append(_check(spec, PROBE_ERROR_RATE, figures[PROBE_ERROR_RATE], ref, notes))
    unsettled: list[str] = []
    enough = new_t.traffic >= spec.min_requests
    if enough:
        for figure in (ERROR_RATE, SIGNAL_ERROR_RATE, MEAN_REQUEST, MEAN_QUEUE):
            if figure in figures:
                checks.append(_check(spec, figure, figures[figure], ref, notes))
        if spec.p99_us.absolute is not None or spec.p99_us.ratio is not None:
            for interval in new:
                if interval.traffic <= 0:
                    continue
                if math.isnan(interval.p99_us):
                    unsettled.append(f"no p99 in {interval.server}'s summary window (is the server started with "
                                     "--metrics-config summary_latencies=true?)")
                    continue
                checks.append(_check(spec, P99, interval.p99_us, ref, notes, interval.server))
    judged = tuple(c for c in checks if c is not None)
    failed = [c.sentence for c in sorted(judged, key=lambda c: FIGURES.index(c.figure)) if not c.passed]
    missing = [f"{i.server} reports no figures for {i.model} version {i.version} (is the new release loaded there?)"
               for i in new if not i.present]
    if failed:
        status, reason = FAIL, "; ".join(failed)
    elif missing:
        status, reason = INCONCLUSIVE, "; ".join(missing)
    elif not enough:
        status = INCONCLUSIVE
        reason = (f"too little traffic: {new_t.traffic:g} requests of user traffic to the new release in this "
                  f"interval, need {spec.min_requests} (serve.watch.min_requests)")
    elif unsettled:
        status, reason = INCONCLUSIVE, "unsettled: " + "; ".join(unsettled)
    else:
        status, reason = PASS, "; ".join(c.sentence for c in judged) or "no limit set"
    return Measurement(index, at_s, status, reason, judged, tuple(notes), tuple(new), tuple(old), new_t.traffic)
