"""The paired gates wired as the canary's Gates (canary/judge/paired_gates.py) beside the point-estimate quality gates."""

from __future__ import annotations

import numpy as np

from model_release.canary.judge import gates as gt
from model_release.canary.judge import quality as q
from model_release.canary.judge.compare import Interface
from model_release.canary.judge.paired_gates import paired_quality_gates, report_only_likeness
from model_release.canary.judge.paired_quality import PAIRED_METRICS
from model_release.spec import parse_spec

LABELS = ["setosa", "versicolor", "virginica"]
SERVED = Interface({"label": "label", "probabilities": "probabilities"}, LABELS, [0, 1, 2])
NATIVE = Interface({"label": "label", "probabilities": "probabilities"}, None, [0, 1, 2])


def _spec(**quality):  # noqa: ANN003, ANN202
    return parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"}, "canary": {"quality": quality}})


def _outputs(predicted: np.ndarray, names: bool = True) -> dict[str, np.ndarray]:
    labels = (np.array([[LABELS[i].encode()] for i in predicted], dtype=object) if names else predicted.reshape(-1, 1))
    return {"label": labels, "probabilities": np.eye(3)[predicted] * 0.9 + 0.1 / 3}


def _case():  # noqa: ANN202
    """150 rows; the candidate gets 3 more wrong than the native champion (the issue's 0.9533 against 0.9733)."""
    truth = np.repeat([0, 1, 2], 50)
    champion = truth.copy()
    champion[[50, 51, 52, 53]] = 2
    candidate = champion.copy()
    candidate[[100, 101, 102]] = 1
    return truth, candidate, champion


def test_three_rows_worse_of_150_pass_paired_where_the_point_estimate_blocked():
    truth, candidate, champion = _case()
    spec = _spec()
    target = np.array([LABELS[t] for t in truth])
    mine = q.served_metrics(SERVED, _outputs(candidate), target, "c")
    theirs = q.served_metrics(NATIVE, _outputs(champion, names=False), target, "champion", target_names=LABELS)
    point = gt.quality_gates(spec, "classification", mine, theirs, "iris-1")
    assert [g.name for g in point if g.failed] == ["quality.accuracy"]  # 0.02 > max_absolute_drop 0.01 on two estimates

    gates, section = paired_quality_gates(spec.canary, "classification", SERVED, _outputs(candidate), target, NATIVE,
                                          _outputs(champion, names=False), champion_name="iris-1", native_names=True)
    by_name = {g.name: g for g in gates}
    assert not any(g.failed for g in gates)
    assert by_name["quality.accuracy"].message.startswith(
        "accuracy 0.9533 against 0.9733 on the same 150 rows: 3 rows worse, 0 better; a drop beyond 0.01 cannot be shown (p = 0.25;")
    assert {"flips.negative", "quality.log_loss", "classes"} <= set(by_name) and by_name["classes"].passed is True
    assert by_name["classes"].candidate == "0 of 6 class gates blocked"
    assert section["flips"]["negative"] == 3 and [r["class"] for r in section["classes"]] == LABELS
    assert "reliability" in section and section["findings"][0]["name"] == "quality.accuracy"
    rest = gt.quality_gates(spec, "classification", mine, theirs, "iris-1", paired=PAIRED_METRICS)
    assert rest == []  # accuracy's only default limit is a drop: decided paired, not twice


def test_a_value_threshold_stays_an_mlflow_check_beside_the_paired_drop():
    truth, candidate, champion = _case()
    spec = _spec(accuracy={"threshold": 0.96, "max_absolute_drop": 0.01})
    target = np.array([LABELS[t] for t in truth])
    mine = q.served_metrics(SERVED, _outputs(candidate), target, "c")
    rest = gt.quality_gates(spec, "classification", mine, mine, "iris-1", paired=PAIRED_METRICS)
    assert [(g.name, g.failed) for g in rest] == [("quality.accuracy.threshold", True)]
    assert "threshold" in rest[0].message and "max_absolute_drop" not in rest[0].message


def test_with_ground_truth_agreement_and_psi_no_longer_gate():
    spec = _spec()
    shift = {"agreement": 0.84, "psi": 0.3, "candidate_frequencies": {}, "champion_frequencies": {}}
    likeness = gt.agreement_gates(spec, shift, "iris-1", "")
    assert [g.failed for g in likeness] == [True, True]
    flips = gt.Gate("flips.negative", True, "canary.champion.max_negative_flips")
    judged = report_only_likeness([flips, *likeness])
    assert judged == [flips]  # their figures stay in report.shift; they take no line of the verdict
    assert report_only_likeness(likeness) == likeness  # no ground truth: they stay the gates


def test_without_a_champion_only_the_candidates_own_figures_and_a_regressor_gets_rmse():
    truth, candidate, _ = _case()
    target = np.array([LABELS[t] for t in truth])
    gates, section = paired_quality_gates(_spec().canary, "classification", SERVED, _outputs(candidate), target, None, None,
                                          champion_name="none")
    assert gates == [] and "candidate" in section["reliability"]
    regressor = Interface({"variable": "y"})
    y = np.linspace(0, 1, 200).reshape(-1, 1)
    gates, _ = paired_quality_gates(_spec().canary, "regression", regressor, {"y": y + 0.5}, y.reshape(-1), regressor,
                                    {"y": y + 0.01}, champion_name="r-1")
    assert [(g.name, g.failed) for g in gates] == [("quality.rmse", True)]


def test_the_per_class_findings_are_one_gate_naming_each_class_that_blocks():
    from model_release.canary.judge.outcome import BLOCK, PASS, Finding
    from model_release.canary.judge.paired_gates import classes_gate

    found = [Finding("class.recall[a]", PASS, "canary.classes.max_recall_drop", "fine", limit="at most 0.05 lower"),
             Finding("class.recall[rare]", BLOCK, "canary.classes.max_recall_drop", "recall of class 'rare' collapsed",
                     limit="at most 0.05 lower")]
    gate = classes_gate(found)
    assert gate.failed and gate.message == "recall of class 'rare' collapsed" and gate.candidate == "1 of 2 class gates blocked"
    assert gate.reason.endswith("[canary.classes]") and gate.limit == "recall at most 0.05 lower"


def test_a_value_threshold_and_the_paired_drop_are_one_line_failing_when_either_fails():
    from model_release.canary.judge.paired_gates import with_thresholds

    threshold = gt.Gate("quality.accuracy.threshold", False, "canary.quality.accuracy", limit=">= 0.9", message="below 0.9")
    drop = gt.Gate("quality.accuracy", True, "canary.quality.accuracy", limit="at most 0.01 worse", message="no drop shown")
    other = gt.Gate("contract", True, "promote.breaking_change")
    merged = with_thresholds([other, threshold], [drop])
    assert [g.name for g in merged] == ["contract", "quality.accuracy"]
    assert merged[1].failed and merged[1].message == "below 0.9" and merged[1].limit == ">= 0.9; at most 0.01 worse"
