"""Latency ratios as intervals (canary/judge/latency_ratio.py): noise around the limit is inconclusive."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model_release.canary.judge.latency_ratio import P99, THROUGHPUT, pairs_to_decide, ratio_gate, ratio_interval
from model_release.canary.judge.outcome import BLOCK, INCONCLUSIVE, PASS


def _p99(ratios):  # noqa: ANN001, ANN202
    return ratio_gate(P99, ratios, 1.25)


def test_a_noisy_ratio_around_the_limit_is_inconclusive_and_says_what_would_decide_it():
    finding = _p99([1.14, 1.28, 1.17, 1.35, 1.22, 1.31])  # one busy canary's window pairs
    assert finding.outcome == INCONCLUSIVE and finding.passed is None
    assert "straddles canary.load.max_p99_ratio 1.25" in finding.message and "quieter canary" in finding.message
    assert finding.data["pairs_needed"] > 6


def test_a_clear_regression_blocks_and_a_clear_pass_passes():
    blocked = _p99([1.9, 2.1, 2.0, 1.95])
    assert blocked.outcome == BLOCK and "beyond canary.load.max_p99_ratio 1.25" in blocked.message
    assert _p99([1.01, 0.98, 1.03, 1.0]).outcome == PASS


@pytest.mark.parametrize(("ratios", "outcome"), [([0.7, 0.72, 0.69], BLOCK), ([0.78, 0.82, 0.8, 0.79], INCONCLUSIVE),
                                                 ([1.0, 0.97, 1.02], PASS)])
def test_throughput_must_stay_at_least_its_limit(ratios, outcome):
    finding = ratio_gate(THROUGHPUT, ratios, 0.8)
    assert finding.outcome == outcome


def test_the_interval_is_the_geometric_mean_with_t_bounds_on_the_logs():
    from scipy.stats import t

    ratios = [1.1, 1.3, 1.2]
    logs = np.log(ratios)
    half = t.ppf(0.95, 2) * logs.std(ddof=1) / math.sqrt(3)
    interval = ratio_interval(ratios)
    assert interval.estimate == pytest.approx(math.exp(logs.mean()))
    assert (interval.lower, interval.upper) == (pytest.approx(math.exp(logs.mean() - half)), pytest.approx(math.exp(logs.mean() + half)))


def test_one_window_pair_or_none_cannot_decide():
    assert _p99([1.1]).outcome == INCONCLUSIVE and "too few for an interval" in _p99([1.1]).message
    assert _p99([math.nan, math.inf]).outcome == INCONCLUSIVE
    assert pairs_to_decide([1.1], 1.25) is None


def test_more_pairs_at_the_same_spread_decide_what_few_could_not():
    noisy = [1.14, 1.28, 1.17, 1.35, 1.22, 1.31]
    needed = pairs_to_decide(noisy, 1.25)
    assert _p99(noisy * math.ceil(needed * 2 / len(noisy))).outcome != INCONCLUSIVE
