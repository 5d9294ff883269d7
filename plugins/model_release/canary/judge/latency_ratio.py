"""The latency gates' ratios to the champion as intervals: a busy canary's noise is inconclusive, not a coin flip.

The load phase runs candidate and champion in alternating windows, and :func:`~model_release.canary.measure.load.paired_ratios`
gives one ratio per window pair (``p99_ratios``, ``throughput_ratios``). A ratio's interval is the
geometric mean of the pairs' ratios with Student's t bounds on their logs (each one-sided at the
gate's confidence): a ratio is multiplicative, and a slow pair doubles as much as a fast one halves.

:func:`ratio_gate` decides, for a ratio that must stay at most (p99) or at least (throughput) its limit:

- **block**: the interval lies beyond the limit (a clear regression);
- **pass**: it lies within;
- **inconclusive**: it straddles the limit, or fewer than two pairs give no spread: the finding says
  about how many window pairs at the spread seen would decide it, or to measure on a quieter canary.

Each gate names its figure (:data:`P99`, :data:`THROUGHPUT`: the gate, the figure in words, the
setting), defined once here for the judge and for the load phase's own stop check
(:func:`load_ratio_findings`). A pass rests only on the pairs whose two windows each held
``canary.load.min_requests`` requests (a window's p99 over fewer is about its slowest request): a
slow model whose windows fall short within ``canary.load.budget_s`` is inconclusive, and the finding
says how many requests the windows held and about what budget would give enough. A block stands on
every pair: an interval wholly beyond the limit is a regression however thin the windows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .outcome import BLOCK, DEFAULT_CONFIDENCE, INCONCLUSIVE, PASS, Finding, Interval, decide, percent

#: the fewest window pairs whose spread makes an interval
MIN_PAIRS = 2


@dataclass(frozen=True)
class RatioFigure:
    """One ratio to the champion that the load gates judge: the gate, its figure in words, its limit's setting."""

    gate: str
    key: str  #: its ratios in the load phase's pairs: ``<key>_ratios``
    what: str
    setting: str
    higher_is_worse: bool

    @property
    def limit_field(self) -> str:
        """The limit's field in ``canary.load``."""
        return self.setting.rsplit(".", 1)[1]


P99 = RatioFigure("load.p99_ratio", "p99", "p99 latency under load", "canary.load.max_p99_ratio", True)
THROUGHPUT = RatioFigure("load.throughput_ratio", "throughput", "throughput under load", "canary.load.min_throughput_ratio", False)
#: the ratio gates, in the report's order
RATIO_FIGURES = (P99, THROUGHPUT)


def ratio_interval(ratios: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Geometric mean of ``ratios`` with one-sided t bounds at ``confidence`` (NaN bounds with fewer than two)."""
    from scipy.stats import t as student

    r = np.asarray([x for x in ratios if x is not None and math.isfinite(x) and x > 0], dtype=np.float64)
    if r.size == 0:
        return Interval(math.nan, math.nan, math.nan, confidence)
    logs = np.log(r)
    centre = float(logs.mean())
    if r.size < MIN_PAIRS:
        return Interval(math.exp(centre), math.nan, math.nan, confidence)
    half = float(student.ppf(confidence, r.size - 1)) * float(logs.std(ddof=1)) / math.sqrt(r.size)
    return Interval(math.exp(centre), math.exp(centre - half), math.exp(centre + half), confidence)


def pairs_to_decide(ratios: Sequence[float], limit: float, confidence: float = DEFAULT_CONFIDENCE) -> int | None:
    """About how many window pairs at the spread seen would put the interval on one side of ``limit``; None: no estimate."""
    from scipy.stats import norm

    r = np.asarray([x for x in ratios if x is not None and math.isfinite(x) and x > 0], dtype=np.float64)
    if r.size < MIN_PAIRS:
        return None
    gap = abs(float(np.log(r).mean()) - math.log(limit))
    spread = float(np.log(r).std(ddof=1))
    if gap == 0 or spread == 0:
        return None
    return int(math.ceil((float(norm.ppf(confidence)) * spread / gap) ** 2)) + 1


def ratio_gate(figure: RatioFigure, ratios: Sequence[float], limit: float, *,
               confidence: float = DEFAULT_CONFIDENCE) -> Finding:
    """The decision on one ratio to the champion from its window pairs' ratios.

    Args:
        figure: which ratio (:data:`P99`: at most ``limit``; :data:`THROUGHPUT`: at least): its gate,
            its setting, and the figure in words that every finding names.
        ratios: candidate over champion, one per window pair.
        limit: the ratio's limit (``canary.load.max_p99_ratio``, ``min_throughput_ratio``).
        confidence: of each bound.
    """
    name, setting, what, higher_is_worse = figure.gate, figure.setting, figure.what, figure.higher_is_worse
    interval = ratio_interval(ratios, confidence)
    pairs = sum(1 for x in ratios if x is not None and math.isfinite(x) and x > 0)
    data = {"ratio": interval.to_dict(), "pairs": pairs, "limit": limit, "ratios": [float(x) for x in ratios]}
    side = "at most" if higher_is_worse else "at least"
    if pairs < MIN_PAIRS:
        return Finding(name, INCONCLUSIVE, setting, f"{what}: {pairs} window pair(s) measured, too few for an interval; "
                       "give canary.load.budget_s room for more windows", limit=f"{side} {limit:g} x the champion's", data=data)
    if higher_is_worse:
        outcome = decide(interval, limit, prove=True)
    else:  # a drop in throughput: flip the ratio so that above the limit is worse
        outcome = decide(Interval(1 / interval.estimate, 1 / interval.upper, 1 / interval.lower, confidence), 1 / limit, prove=True)
    band = f"{interval.estimate:.3g} x the champion's ({interval.lower:.3g} to {interval.upper:.3g} with {percent(confidence)} confidence each way, {pairs} window pairs)"
    if outcome == BLOCK:
        message = f"{what} is {band}: beyond {setting} {limit:g}"
    elif outcome == PASS:
        message = f"{what} is {band}: within {setting} {limit:g}"
    else:
        needed = pairs_to_decide(ratios, limit, confidence)
        data["pairs_needed"] = needed
        more = f"about {needed} window pairs at this spread would decide it" if needed else "more window pairs would decide it"
        message = (f"{what} is {band}: the interval straddles {setting} {limit:g}, so the canary cannot tell; "
                   f"{more} (canary.load.budget_s), or measure on a quieter canary")
    return Finding(name, outcome, setting, message, candidate=interval.estimate, champion=1.0,
                   limit=f"{side} {limit:g} x the champion's", data=data)


def load_ratio_findings(paired: Mapping[str, Any], load: Any, confidence: float = DEFAULT_CONFIDENCE) -> list[Finding]:
    """Each ratio gate's finding (:data:`RATIO_FIGURES`) from the load phase's window pairs.

    A block stands on every pair; anything else is decided on the pairs whose two windows each held
    ``min_requests`` requests (a window the budget cut short says too little to clear the candidate).

    Args:
        paired: :func:`~model_release.canary.measure.load.paired_ratios` of the load phase (or of a
            report written before the pairs' ratios were: its one ratio).
        load: ``canary.load`` (its limits, ``min_requests``, ``budget_s``, ``stable_windows``).
        confidence: of each bound (``canary.confidence``).
    """
    return [_finding(figure, paired, load, confidence) for figure in RATIO_FIGURES]


def _ratios(paired: Mapping[str, Any], figure: str) -> list[float]:
    """The window pairs' ``figure`` ratios (``p99``, ``throughput``); a report without them gives its one ratio."""
    ratios = paired.get(f"{figure}_ratios")
    if isinstance(ratios, list):
        return [float(r) for r in ratios]
    one = paired.get(f"{figure}_ratio")
    return [float(one)] if isinstance(one, int | float) and math.isfinite(one) else []


def _finding(figure: RatioFigure, paired: Mapping[str, Any], load: Any, confidence: float) -> Finding:
    """One ratio gate's finding, a pass resting only on pairs of windows that held ``min_requests`` requests."""
    ratios, limit = _ratios(paired, figure.key), getattr(load, figure.limit_field)
    finding = ratio_gate(figure, ratios, limit, confidence=confidence)
    requests = [int(r) for r in paired.get("requests") or []]
    if len(requests) != len(ratios) or not requests:  # a report written before the windows' requests were recorded
        return finding
    needed = int(load.min_requests)
    full = [r for r, n in zip(ratios, requests) if n >= needed]
    if finding.outcome != BLOCK and len(full) < len(ratios):
        finding = ratio_gate(figure, full, limit, confidence=confidence)
        finding.message += f" (the {len(full)} of {len(ratios)} pairs whose windows held {needed} requests or more)"
    fewest, most = min(requests), max(requests)
    finding.data.update(requests_per_window={"fewest": fewest, "most": most}, min_requests=needed, pairs_measured=len(ratios))
    counts = f"{fewest}" if fewest == most else f"{fewest} to {most}"
    finding.message += f"; the windows held {counts} requests each (canary.load.min_requests {needed})"
    if finding.outcome == INCONCLUSIVE and len(full) < max(MIN_PAIRS, int(load.stable_windows)):
        why = ": a window's p99 over fewer requests is about its slowest one, too few to clear the candidate" if len(
            full) < len(ratios) else ""
        finding.message += f"{why}; {_budget_advice(paired, load)}"
    return finding


def _budget_advice(paired: Mapping[str, Any], load: Any) -> str:
    """About what ``canary.load.budget_s`` would give enough pairs of windows holding ``min_requests`` requests."""
    rate = paired.get("requests_per_s")
    if not isinstance(rate, int | float) or not rate > 0:
        return "give canary.load.budget_s room for more requests, or lower canary.load.min_requests"
    window_s = max(float(load.window_s), load.min_requests / rate)
    pairs = max(int(load.stable_windows), MIN_PAIRS + 1)
    return (f"at the {rate:.3g} requests/s measured, a window of {load.min_requests} requests takes about {window_s:.3g} s, "
            f"so {pairs} pairs need canary.load.budget_s of about {2 * pairs * window_s:.0f} s "
            f"(it is {load.budget_s:g}); or lower canary.load.min_requests")
