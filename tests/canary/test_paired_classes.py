"""Per-class and per-slice gates (canary/judge/classes.py): a collapsed small class is blocked by name."""

from __future__ import annotations

import numpy as np
import pytest

from model_release.canary.judge.change import accuracy_change
from model_release.canary.judge.classes import class_gates, slice_gates
from model_release.canary.judge.outcome import BLOCK, PASS

CLASSES = ["common", "usual", "rare"]


def _collapse() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """2000 rows; 'rare' is 60 (3%): champion recall 49/60 (0.82), candidate 0, better elsewhere (truth, candidate, champion)."""
    truth = np.array([0] * 970 + [1] * 970 + [2] * 60)
    champion, candidate = truth.copy(), truth.copy()
    champion[900:970], champion[970 + 900:1940] = 1, 0  # 70 misses in each big class
    candidate[920:970], candidate[970 + 920:1940] = 1, 0  # 50 misses in each
    champion[1940 + 49:] = 0  # 11 rare rows answered 'common'
    candidate[1940:] = 0  # every rare row answered 'common'
    order = np.random.default_rng(4).permutation(2000)
    return truth[order], candidate[order], champion[order]


def test_a_candidate_whose_three_percent_class_collapses_is_blocked_naming_the_class():
    truth, candidate, champion = _collapse()
    overall = accuracy_change(candidate == truth, champion == truth, max_absolute_drop=0.01)[0]
    assert overall.outcome == PASS  # 0.92 against 0.9245: within the overall accuracy limit

    findings, table = class_gates(truth, candidate, champion, CLASSES)
    blocked = [f for f in findings if f.outcome == BLOCK]
    assert [f.name for f in blocked] == ["class.recall[rare]"]
    assert blocked[0].message.startswith("recall of class 'rare' 0.0000 against 0.8167 on the same 60 rows: 49 rows worse")
    assert blocked[0].setting == "canary.classes.max_recall_drop"
    rare = table[2]
    assert rare["recall"] == {"candidate": 0.0, "champion": pytest.approx(49 / 60)} and rare["recall_outcome"] == BLOCK
    assert rare["precision_outcome"] is None and "0 answers by one of the models" in rare["precision_not_gated"]
    assert table[0]["precision_outcome"] == PASS and table[0]["support"] == 970


def test_the_class_gates_share_the_confidence_and_a_small_class_is_reported_not_gated():
    truth, candidate, champion = _collapse()
    findings, table = class_gates(truth, candidate, champion, CLASSES, min_support=61)
    assert "class.recall[rare]" not in [f.name for f in findings]
    assert table[2]["recall_not_gated"] == ("60 golden rows, fewer than the 61 a class needs to be gated "
                                            "(canary.classes.min_support)")
    gated = len(findings)  # common and usual: recall and precision each
    assert gated == 4 and all(f.data["confidence"] == pytest.approx(1 - 0.05 / 4) for f in findings)


@pytest.mark.parametrize(("misses", "outcome"), [(0, PASS), (25, BLOCK)])
def test_a_precision_drop_just_inside_and_outside_its_limit(misses, outcome):
    truth = np.array([0] * 500 + [1] * 500)
    champion = truth.copy()
    candidate = truth.copy()
    candidate[500:500 + misses] = 0  # class 1 rows answered 0: class 0's precision falls to 500/(500+misses)
    findings, _ = class_gates(truth, candidate, champion, ["a", "b"], max_recall_drop=None, max_precision_drop=0.01)
    assert {f.name: f.outcome for f in findings}["class.precision[a]"] == outcome


def test_slices_run_the_same_gate_on_each_value_of_a_golden_column():
    rows = 3000
    region = np.array(["north"] * 1400 + ["south"] * 1400 + ["tiny"] * 200)
    champion_right = np.ones(rows, bool)
    candidate_right = np.ones(rows, bool)
    candidate_right[1400:1400 + 140] = False  # south loses 10 points; north and the whole far less
    def gates(mask, confidence, label):  # noqa: ANN001, ANN202
        return accuracy_change(candidate_right[mask], champion_right[mask], max_absolute_drop=0.05, confidence=confidence)

    findings, table = slice_gates(region, "region", gates, min_support=300)
    assert {f.name: f.outcome for f in findings} == {"quality.accuracy[region=north]": PASS,
                                                     "quality.accuracy[region=south]": BLOCK}
    assert table[2] == {"slice": "region=tiny", "rows": 200,
                        "not_gated": "200 golden rows, fewer than the 300 a slice needs to be gated (canary.classes.min_support)"}
    assert findings[0].data["confidence"] == pytest.approx(0.975)
    assert accuracy_change(candidate_right, champion_right, max_absolute_drop=0.05)[0].outcome == PASS
