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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .outcome import BLOCK, DEFAULT_CONFIDENCE, INCONCLUSIVE, PASS, Finding, Interval, decide, percent

#: the fewest window pairs whose spread makes an interval
MIN_PAIRS = 2


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


def ratio_gate(name: str, ratios: Sequence[float], limit: float, *, higher_is_worse: bool = True, setting: str,
               confidence: float = DEFAULT_CONFIDENCE, what: str = "p99 latency") -> Finding:
    """The decision on one ratio to the champion from its window pairs' ratios.

    Args:
        name: the gate (``load.p99_ratio``).
        ratios: candidate over champion, one per window pair.
        limit: the ratio's limit (``canary.load.max_p99_ratio``: at most; ``min_throughput_ratio``: at least).
        higher_is_worse: True for a ratio that must stay at most ``limit`` (latency), False for at least (throughput).
        setting: the spec setting of the limit.
        confidence: of each bound.
        what: the figure, in words.
    """
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
