"""Non-finite first: NaN outputs with ground truth are decided by the non-finite gate; no metric raises; the report is written."""

from __future__ import annotations

import json

import numpy as np

from model_release.canary.judge import gates as gt
from model_release.canary.judge import quality as q
from model_release.canary.judge.compare import Interface
from model_release.canary.judge.calibration import log_loss_change, reliability
from model_release.canary.judge.outcome import PASS
from model_release.canary.report.document import write_reports
from model_release.spec import parse_spec

LABELS = ["setosa", "versicolor", "virginica"]
SERVED = Interface({"label": "label", "probabilities": "probabilities"}, LABELS, [0, 1, 2])
SPEC = parse_spec({"name": "iris", "model": {"name": "m", "alias": "candidate"}})


def _outputs(rows: int, nan_rows: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    truth = np.arange(rows) % 3
    scores = np.eye(3)[truth] * 0.8 + 0.1 * (1 - np.eye(3)[truth])
    scores[:nan_rows] = np.nan
    labels = np.array([[LABELS[t].encode()] for t in truth], dtype=object)
    return {"label": labels, "probabilities": scores}, truth


def test_nan_class_scores_with_ground_truth_are_blocked_by_the_nonfinite_gate_and_the_report_is_written(tmp_path):
    outputs, truth = _outputs(150, 4)
    figures = q.served_metrics(SERVED, outputs, truth, "the candidate")  # raised ValueError: Input contains NaN
    assert figures["rows_with_nonfinite_scores"] == 4 and figures["accuracy"] == 1.0
    assert figures["log_loss"] == np.float64(-np.log(0.8))  # over the 146 finite rows
    gates = [gt.nonfinite_gate(q.nonfinite_rows(outputs), 150), *gt.quality_gates(SPEC, "classification", figures, figures, "iris-1")]
    assert [g.name for g in gates if g.failed] == ["nonfinite"]
    assert 'served outputs hold NaN or infinite values: "probabilities" on 4 of 150 rows' in gates[0].message

    scores = outputs["probabilities"]
    assert log_loss_change(scores, scores, truth)[0].data["rows_left_out"] == 4
    assert reliability(scores, truth)["rows_left_out"] == 4
    json_path, html_path = write_reports(tmp_path, {
        "release": "iris", "release_id": "iris-2", "passed": False, "reasons": [g.reason for g in gates if g.failed],
        "quality": {"task": "classification", "candidate": figures}, "gates": [g.to_dict() for g in gates]})
    assert json.loads(json_path.read_text())["quality"]["candidate"]["rows_with_nonfinite_scores"] == 4
    assert "NaN or infinite" in html_path.read_text()


def test_nan_predictions_of_a_regressor_and_nan_scores_of_a_scores_only_classifier_raise_nothing():
    regressor = Interface({"variable": "y"})
    figures = q.served_metrics(regressor, {"y": np.array([[1.0], [np.nan], [np.inf], [4.0]])}, np.array([1.0, 2, 3, 5]), "c")
    assert figures["rows_with_nonfinite_values"] == 2 and figures["mae"] == 0.5
    assert q.served_metrics(regressor, {"y": np.full((2, 1), np.nan)}, np.array([1.0, 2.0]), "c") == {
        "rows_with_nonfinite_values": 2.0}
    scores_only = Interface({"probabilities": "probabilities"}, None, [0, 1, 2])
    outputs, truth = _outputs(6, 3)
    figures = q.served_metrics(scores_only, {"probabilities": outputs["probabilities"]}, truth, "c")
    assert figures["accuracy"] == 0.5  # a row of NaN scores answers nothing: a miss, never class 0
    assert [g.outcome for g in log_loss_change(outputs["probabilities"], outputs["probabilities"], truth)] == [PASS]
