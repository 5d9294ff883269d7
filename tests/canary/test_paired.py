"""Paired change gates (canary/judge/paired.py, change.py): decided from the same rows, with their bounds.

Each gate just inside and just outside its limit; the same per-row drop on 150 rows (noise) and on
15,000 rows (evidence); the statistics checked against independent computations and by simulation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from model_release.canary.judge import quality as q
from model_release.canary.judge.change import accuracy_change, loss_change, negative_flips
from model_release.canary.judge.outcome import BLOCK, INCONCLUSIVE, PASS, Finding, Interval, decide
from model_release.canary.judge.paired import (Discordance, bootstrap, bootstrap_interval, drop_interval, drop_shown,
                                               mcnemar_p, rows_to_show, smallest_drop_shown, tango_z)


def _pairs(n: int, worse: int, better: int, both_right: int) -> tuple[np.ndarray, np.ndarray]:
    """(candidate right, champion right) on n rows: ``worse`` lost, ``better`` won, ``both_right`` right for both."""
    candidate, champion = np.zeros(n, bool), np.zeros(n, bool)
    candidate[:both_right] = champion[:both_right] = True
    champion[both_right:both_right + worse] = True
    candidate[both_right + worse:both_right + worse + better] = True
    return candidate, champion


# --- the decision rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(("lower", "upper", "prove", "outcome"), [
    (0.011, 0.03, False, BLOCK), (0.01, 0.03, False, PASS), (-0.01, 0.03, False, PASS),
    (-0.01, 0.01, True, PASS), (-0.01, 0.0101, True, INCONCLUSIVE), (0.0101, 0.03, True, BLOCK),
])
def test_decide_blocks_on_evidence_passes_otherwise_and_is_inconclusive_only_where_proof_is_asked(lower, upper, prove, outcome):
    assert decide(Interval(0.0, lower, upper, 0.95), 0.01, prove=prove) == outcome


def test_a_finding_knows_its_outcomes_and_refuses_others():
    assert Finding("g", INCONCLUSIVE, "s", "m").passed is None and Finding("g", BLOCK, "s", "m").passed is False
    assert Finding("g", PASS, "s", "m", data={"x": math.inf}).to_dict()["data"] == {"x": None}
    with pytest.raises(ValueError, match="outcome 'maybe' is not one of pass, block, inconclusive"):
        Finding("g", "maybe", "s", "m")


# --- accuracy from the discordant pairs ---------------------------------------------------------------


def test_three_more_wrong_of_150_is_noise_and_the_same_drop_on_15000_rows_blocks():
    candidate, champion = _pairs(150, 3, 0, 143)  # 0.9533 against 0.9733
    small = accuracy_change(candidate, champion, max_absolute_drop=0.01)[0]
    assert small.outcome == PASS and small.data["mcnemar_p"] == pytest.approx(0.25)
    assert small.message.startswith("accuracy 0.9533 against 0.9733 on the same 150 rows: 3 rows worse, 0 better; "
                                    "a drop beyond 0.01 cannot be shown (p = 0.25;")
    assert small.data["underpowered"] and small.data["rows_needed"] > 1000 and "raise golden.rows" in small.message

    large = accuracy_change(np.tile(candidate, 100), np.tile(champion, 100), max_absolute_drop=0.01)[0]
    assert large.outcome == BLOCK and large.passed is False
    assert "300 rows worse, 0 better; the drop is at least 0.018" in large.message
    assert large.setting == "canary.quality.accuracy" and "beyond canary.quality.accuracy.max_absolute_drop 0.01 (McNemar" in large.message and not large.data["underpowered"]


def test_accuracy_gate_just_inside_and_just_outside_its_limit_on_15000_rows():
    least = smallest_drop_shown(15000, 0.01, 0.95)
    assert least is not None and 150 < least < 250  # a drop just above one point, shown with 95% confidence
    inside = accuracy_change(*_pairs(15000, least - 1, 0, 14000), max_absolute_drop=0.01)[0]
    outside = accuracy_change(*_pairs(15000, least, 0, 14000), max_absolute_drop=0.01)[0]
    assert (inside.outcome, outside.outcome) == (PASS, BLOCK)
    assert inside.data["drop"]["lower"] <= 0.01 < outside.data["drop"]["lower"]


def test_a_relative_limit_is_a_share_of_the_champions_accuracy():
    finding = accuracy_change(*_pairs(15000, 300, 0, 12000), max_relative_drop=0.05)[0]  # champion 0.82: allowed 0.041
    assert finding.outcome == PASS and finding.data["allowed_drop"] == pytest.approx(0.05 * 12300 / 15000)
    assert finding.setting == "canary.quality.accuracy" and finding.limit.startswith("at most 5.00% worse")


def test_where_proof_is_asked_an_undecided_drop_is_inconclusive_and_says_how_many_rows_would_decide():
    finding = accuracy_change(*_pairs(150, 1, 1, 140), max_absolute_drop=0.01, prove=True)[0]
    assert finding.outcome == INCONCLUSIVE and finding.passed is None
    assert "can neither show it beyond 0.01 nor rule that out" in finding.message and finding.data["rows_needed"] > 150
    proven = accuracy_change(*_pairs(15000, 10, 10, 14000), max_absolute_drop=0.01, prove=True)[0]
    assert proven.outcome == PASS


def test_mcnemar_is_scipys_exact_binomial_test_of_the_discordant_rows():
    assert mcnemar_p(3, 0) == pytest.approx(0.25) and mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(3, 0, alternative="greater") == pytest.approx(0.125)
    assert mcnemar_p(10, 2) == pytest.approx(2 * sum(math.comb(12, k) for k in range(10, 13)) / 2**12)


def test_tangos_score_is_mcnemars_z_at_zero_and_uses_the_constrained_maximum_likelihood():
    from scipy.optimize import minimize_scalar

    d = Discordance(200, 14, 5)
    assert tango_z(d, 0.0) == pytest.approx((14 - 5) / math.sqrt(19))
    delta = 0.02  # the restricted MLE of the 'better' cell under drop = delta, found numerically

    def nll(p21: float) -> float:
        p12 = p21 + delta
        return -(d.worse * math.log(p12) + d.better * math.log(p21) + (d.n - d.worse - d.better) * math.log(1 - p12 - p21))

    p21 = minimize_scalar(nll, bounds=(1e-9, (1 - delta) / 2 - 1e-9), method="bounded", options={"xatol": 1e-12}).x
    expected = (d.worse - d.better - d.n * delta) / math.sqrt(d.n * (2 * p21 + delta * (1 - delta)))
    assert tango_z(d, delta) == pytest.approx(expected, rel=1e-5)
    interval = drop_interval(d, 0.95)
    assert tango_z(d, interval.lower) == pytest.approx(1.6449, abs=1e-3) and interval.lower < d.drop < interval.upper


def test_the_block_rule_keeps_its_level_and_the_size_estimate_its_power_by_simulation():
    rng = np.random.default_rng(7)
    n, psi, allowed = 2000, 0.1, 0.01

    def blocked(drop: float, rows: int) -> float:
        p = [(psi + drop) / 2, (psi - drop) / 2]  # worse, better
        counts = rng.multinomial(rows, [*p, 1 - psi], size=300)
        return float(np.mean([drop_shown(Discordance(rows, int(w), int(b)), allowed, 0.95) for w, b, _ in counts]))

    assert blocked(allowed, n) <= 0.08  # at the limit: at most about 5% blocked
    needed = rows_to_show(allowed, 2 * allowed, psi, 0.95)
    assert 0.7 <= blocked(2 * allowed, needed) <= 0.9  # planned for 80%


def test_three_rows_worse_never_show_a_drop_and_zero_allowed_needs_mcnemar_too():
    assert not drop_shown(Discordance(150, 3, 0), 0.0, 0.95)  # the score test alone would (z = 1.73)
    assert tango_z(Discordance(150, 3, 0), 0.0) > 1.645
    assert drop_shown(Discordance(150, 5, 0), 0.0, 0.95)  # exact one-sided p = 1/32


# --- per-row losses by the paired bootstrap -----------------------------------------------------------


def _losses(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """150 per-row champion losses and the candidate's, about 35% larger with much spread, tiled to ``rows``."""
    from scipy.stats import expon, lognorm

    grid = (np.arange(150) + 0.5) / 150
    champion = expon.ppf(grid)
    factor = lognorm.ppf(np.random.default_rng(3).permutation(grid), s=0.8, scale=math.exp(-0.02))
    return np.tile(champion * factor, rows // 150), np.tile(champion, rows // 150)


def test_the_same_per_row_loss_increase_passes_on_150_rows_and_blocks_on_15000():
    small = loss_change("log_loss", *_losses(150), max_relative_drop=0.25)[0]
    large = loss_change("log_loss", *_losses(15000), max_relative_drop=0.25)[0]
    assert small.candidate == pytest.approx(large.candidate) and small.data["drop"]["estimate"] > 0.25
    assert (small.outcome, large.outcome) == (PASS, BLOCK)
    assert "worse by at least" in large.message and "canary.quality.log_loss.max_relative_drop 25.00%" in large.message
    assert small.data["underpowered"] and small.data["rows_needed"] > 150 and "raise golden.rows" in small.message


@pytest.mark.parametrize(("factor", "outcome"), [(1.25, PASS), (1.26, BLOCK)])
def test_a_loss_gate_just_inside_and_just_outside_its_relative_limit(factor, outcome):
    champion = np.random.default_rng(1).exponential(size=15000)
    assert loss_change("log_loss", champion * factor, champion, max_relative_drop=0.25)[0].outcome == outcome


@pytest.mark.parametrize(("shift", "outcome"), [(0.0, PASS), (0.2, BLOCK)])
def test_rmse_is_the_root_of_the_mean_squared_error_per_row(shift, outcome):
    rng = np.random.default_rng(2)
    errors = rng.normal(size=5000)
    finding = loss_change("rmse", (errors + shift) ** 2, errors**2, root=True, max_relative_drop=0.01)[0]
    assert finding.candidate == pytest.approx(math.sqrt(np.mean((errors + shift) ** 2))) and finding.outcome == outcome


def test_a_loss_absolute_limit_and_rows_left_out_when_not_finite():
    champion = np.full(1000, 0.5)
    candidate = champion + 0.05
    candidate[:3] = np.nan
    finding = loss_change("mae", candidate, champion, max_absolute_drop=0.04)[0]
    assert finding.outcome == BLOCK and finding.data["rows_left_out"] == 3 and finding.data["rows"] == 997


def test_the_bootstrap_is_seeded_paired_and_bounded_in_memory():
    x = np.random.default_rng(0).normal(size=(3000, 2))
    stat = lambda m: m[:, 0] - m[:, 1]  # noqa: E731
    a = bootstrap(x, stat, resamples=500, seed=5)
    assert np.array_equal(a, bootstrap(x, stat, resamples=500, seed=5))
    small_chunks = bootstrap(x, stat, resamples=500, seed=5, memory_bytes=3000 * 32 * 7)  # 7 resamples a chunk
    assert small_chunks.std() == pytest.approx(a.std(), rel=0.2)
    assert a.std() == pytest.approx(math.sqrt(2 / 3000), rel=0.15)  # independent columns: the mean difference's SE
    paired = np.column_stack([x[:, 0] + 0.01, x[:, 0]])  # the same rows shifted: no spread at all
    assert bootstrap_interval(paired, stat, 0.95) == Interval(pytest.approx(0.01), pytest.approx(0.01), pytest.approx(0.01), 0.95)


# --- flips ------------------------------------------------------------------------------------------


def test_a_better_model_disagreeing_with_a_weak_champion_on_16_percent_of_rows_passes_the_flip_gate():
    candidate, champion = _pairs(1000, 10, 150, 820)  # champion 0.83, candidate 0.97
    labels = np.array(["a"] * 1000, dtype=object)
    theirs = np.where(champion, "a", "b")
    mine = np.where(candidate, "a", np.where(champion, "b", "b"))
    assert q.agreement(mine, theirs) == pytest.approx(0.84)  # the old agreement gate (0.9) would block it
    flips = negative_flips(mine == labels, theirs == labels)
    assert flips.outcome == PASS and flips.data["negative"] == 10 and flips.data["positive"] == 150
    assert "10 of 1000 rows (1.00%) the champion got right are now wrong, 150 (15.00%) now right" in flips.message
    assert accuracy_change(candidate, champion, max_absolute_drop=0.01)[0].outcome == PASS


@pytest.mark.parametrize(("negative", "outcome"), [(1000, PASS), (1120, BLOCK)])
def test_negative_flips_just_inside_and_just_outside_the_default_five_percent(negative, outcome):
    finding = negative_flips(*_pairs(20000, negative, negative, 15000))  # 5.0% / 5.6% of rows, as many fixed
    assert finding.outcome == outcome and finding.setting == "canary.champion.max_negative_flips"
    if outcome == BLOCK:
        assert "at least 5.3" in finding.message and "beyond canary.champion.max_negative_flips 5.00%" in finding.message


def test_the_bootstraps_memory_stays_within_its_budget_whatever_the_resamples():
    import tracemalloc

    x = np.random.default_rng(0).normal(size=(20000, 2))
    tracemalloc.start()
    try:
        bootstrap(x, lambda m: m[:, 0] - m[:, 1], resamples=2000, memory_bytes=8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 9 << 20  # all 2000 resamples at once would take 2000 x 20000 x 8 bytes = 320 MB
