"""Probability quality (canary/judge/calibration.py): flattened probabilities with the same labels are blocked."""

from __future__ import annotations

import numpy as np
import pytest

from model_release.canary.judge.calibration import ece_gates, log_loss_change, reliability, row_log_loss
from model_release.canary.judge.change import accuracy_change, negative_flips
from model_release.canary.judge.outcome import BLOCK, PASS


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _calibrated(rows: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(logits, truth drawn from their softmax): a perfectly calibrated champion."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(rows, 3)) * 3.0
    p = _softmax(logits)
    truth = (rng.random(rows)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return logits, truth


def test_the_same_labels_with_probabilities_divided_by_a_temperature_are_blocked_by_calibration():
    logits, truth = _calibrated()
    champion, candidate = _softmax(logits), _softmax(logits / 3.0)
    assert np.array_equal(champion.argmax(axis=1), candidate.argmax(axis=1))  # every label the same
    right_c, right_h = candidate.argmax(axis=1) == truth, champion.argmax(axis=1) == truth
    assert accuracy_change(right_c, right_h, max_absolute_drop=0.01)[0].outcome == PASS
    assert negative_flips(right_c, right_h).outcome == PASS

    finding = log_loss_change(candidate, champion, truth)[0]  # the default: at most 25% worse
    assert finding.outcome == BLOCK and finding.setting == "canary.quality.log_loss"
    assert finding.candidate > 1.25 * finding.champion and "worse by at least" in finding.message

    flat = ece_gates(candidate, truth, max_ece=0.05, champion_scores=champion, max_ece_increase=0.02)
    assert {f.name: f.outcome for f in flat} == {"calibration.ece": BLOCK, "calibration.ece_change": BLOCK}
    sound = ece_gates(champion, truth, max_ece=0.05)
    assert [f.outcome for f in sound] == [PASS]


@pytest.mark.parametrize(("temperature", "outcome"), [(1.0, PASS), (2.2, PASS), (2.4, BLOCK), (0.4, BLOCK)])
def test_log_loss_gate_inside_and_outside_its_default(temperature, outcome):
    # 6000 rows: flattened by 2.2 is 24% worse (the bound below 25%), by 2.4 28% (bound 26%); 0.4 is overconfident
    logits, truth = _calibrated(rows=6000, seed=1)
    assert log_loss_change(_softmax(logits / temperature), _softmax(logits), truth)[0].outcome == outcome


def test_reliability_diagram_data_and_ece_by_hand():
    scores = np.array([[0.95, 0.05], [0.95, 0.05], [0.65, 0.35], [0.55, 0.45], [np.nan, 0.5]])
    truth = np.array([0, 1, 0, 0, 0])
    out = reliability(scores, truth, bins=10)
    assert out["rows"] == 4 and out["rows_left_out"] == 1
    top = out["bins"][9]
    assert (top["rows"], top["confidence"], top["accuracy"]) == (2, pytest.approx(0.95), 0.5)
    assert out["bins"][6]["rows"] == 1 and out["bins"][6]["accuracy"] == 1.0
    # ECE: 2/4 * |0.95 - 0.5| + 1/4 * |0.65 - 1| + 1/4 * |0.55 - 1|
    assert out["ece"] == pytest.approx(0.5 * 0.45 + 0.25 * 0.35 + 0.25 * 0.45)
    assert out["bins"][0] == {"lower": 0.0, "upper": 0.1, "rows": 0, "confidence": None, "accuracy": None}


def test_row_log_loss_leaves_out_rows_without_finite_scores_or_a_known_class():
    losses = row_log_loss(np.array([[0.5, 0.5], [np.inf, 0.0], [0.0, 1.0], [0.2, 0.8]]), np.array([0, 0, 0, -1]))
    assert losses[0] == pytest.approx(np.log(2)) and np.isnan(losses[1]) and np.isnan(losses[3])
    assert losses[2] == pytest.approx(-np.log(1e-15), rel=1e-6)  # clipped as sklearn's log_loss clips
