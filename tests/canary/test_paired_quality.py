"""The paired gates of one candidate/champion pair in one call (canary/judge/paired_quality.py), read as served."""

from __future__ import annotations

import numpy as np
import pytest

from model_release.canary.judge import quality as q
from model_release.canary.judge.compare import Interface
from model_release.canary.judge.outcome import BLOCK, PASS
from model_release.canary.judge.paired_quality import (PairedLimits, classifier_findings, in_candidate_classes,
                                                       regressor_findings)

LABELS = ["setosa", "versicolor", "virginica"]
MINE = Interface({"label": "label", "probabilities": "probabilities"}, LABELS, [0, 1, 2])
THEIRS = Interface({"label": "label", "probabilities": "probabilities"}, LABELS[::-1], [2, 1, 0])  # classes the other way round


def _served(predicted: np.ndarray, order: list[str], scores: np.ndarray | None = None) -> dict[str, np.ndarray]:
    labels = np.array([[order[i].encode()] for i in predicted], dtype=object)
    return {"label": labels, "probabilities": np.eye(len(order))[predicted] * 0.9 + 0.05 if scores is None else scores}


def _read(rows: int = 3000, flip_rare: bool = False):  # noqa: ANN202
    truth = np.array([0] * (rows // 2) + [1] * (rows // 2 - 90) + [2] * 90)
    mine = truth.copy()
    if flip_rare:
        mine[truth == 2] = 1
    theirs_in_their_order = 2 - truth  # the champion answers every row right, in its own class order
    target = np.array([LABELS[t] for t in truth])
    return (q.classify(MINE, _served(mine, LABELS), target, "the candidate"),
            q.classify(THEIRS, _served(theirs_in_their_order, LABELS[::-1]), target, "the champion"))


def test_the_champions_answers_are_mapped_to_the_candidates_classes_by_their_text():
    mine, theirs = _read()
    assert np.array_equal(in_candidate_classes(theirs, mine), mine.truth)
    renamed = in_candidate_classes(theirs, mine, {"setosa": "nothing"})
    assert set(renamed[mine.truth == 0].tolist()) == {-2}


def test_one_call_passes_an_equal_candidate_and_blocks_a_collapsed_class_by_name():
    mine, theirs = _read()
    findings, sections = classifier_findings(mine, theirs, champion_name="iris-1")
    assert findings and all(f.outcome == PASS for f in findings)
    assert {"flips", "classes", "reliability"} <= set(sections) and sections["flips"]["negative"] == 0

    mine, theirs = _read(flip_rare=True)
    findings, sections = classifier_findings(mine, theirs, champion_name="iris-1")
    blocked = sorted(f.name for f in findings if f.outcome == BLOCK)
    assert "class.recall[virginica]" in blocked and "quality.accuracy" in blocked
    assert [row["recall_outcome"] for row in sections["classes"]] == [PASS, PASS, BLOCK]
    assert "(iris-1)" in next(f for f in findings if f.name == "quality.accuracy").message


def test_without_a_champion_only_the_candidates_own_calibration_is_judged():
    mine, _ = _read()
    findings, sections = classifier_findings(mine, None, PairedLimits(max_ece=0.2))
    assert [f.name for f in findings] == ["calibration.ece"] and "champion" not in sections["reliability"]


def test_slices_and_limits_turned_off():
    mine, theirs = _read(flip_rare=True)
    region = np.where(np.arange(3000) % 2 == 0, "east", "west")
    limits = PairedLimits(drops={"accuracy": (0.01, None)}, max_recall_drop=None, max_precision_drop=None)
    findings, sections = classifier_findings(mine, theirs, limits, slices={"region": region})
    names = {f.name: f.outcome for f in findings}
    assert names["quality.accuracy[region=east]"] == BLOCK and "flips.negative[region=west]" in names
    assert not any(n.startswith("class.") for n in names) and "log_loss" not in " ".join(names)
    assert [row["slice"] for row in sections["slices"]["region"]] == ["region=east", "region=west"]
    with pytest.raises(ValueError, match="confidence 1.5 is not between 0.5 and 1"):
        PairedLimits(confidence=1.5)


def test_regressor_rmse_and_mae_on_paired_rows():
    rng = np.random.default_rng(0)
    truth = rng.normal(size=(4000, 1))
    theirs = truth + rng.normal(scale=0.5, size=truth.shape)
    findings = regressor_findings(truth, theirs * 1.0, theirs, PairedLimits(drops={"rmse": (None, 0.05), "mae": (0.01, None)}))
    assert [(f.name, f.outcome) for f in findings] == [("quality.rmse", PASS), ("quality.mae", PASS)]
    worse = regressor_findings(truth, theirs + 0.3, theirs)
    assert [(f.name, f.outcome) for f in worse] == [("quality.rmse", BLOCK)]


def test_limits_come_from_the_specs_quality_gates_and_log_loss_is_on_by_default_for_classifiers():
    from model_release.canary.judge.paired_quality import limits_from_spec
    from model_release.spec import parse_spec

    def canary(**quality):  # noqa: ANN003, ANN202
        return parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"}, "canary": {"quality": quality}}).canary

    assert dict(limits_from_spec(canary(), "classification").drops) == {"accuracy": (0.01, None), "log_loss": (None, 0.25)}
    assert dict(limits_from_spec(canary(log_loss=None, accuracy={"threshold": 0.9}), "classification").drops) == {}
    assert dict(limits_from_spec(canary(mae={"max_absolute_drop": 0.1}), "regression").drops) == {
        "rmse": (None, 0.05), "mae": (0.1, None)}
    assert limits_from_spec(canary(), "classification", confidence=0.99).confidence == 0.99
