"""Unit tests of the canary's logic: replay (through a fake InferenceClient), compare, verdict, report, expectations."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping

import numpy as np
import pytest

from model_release.triton.client import replay
from model_release.canary.compare import Interface, compare_with_reference
from model_release.canary.expect import failures, run_expectations
from model_release.canary.report import render_html, verdict, write_reports
from model_release.errors import CanaryRejected
from model_release.spec import Tolerances

LABELS = ["setosa", "versicolor", "virginica"]
CLASSIFIER = {"probabilities": "probabilities", "label": "label"}


def _classifier(classes=(0, 1, 2), labels=LABELS) -> Interface:  # noqa: ANN001
    """How the assembler describes a classifier ensemble that answers label names."""
    return Interface(CLASSIFIER, list(labels) if labels is not None else None, list(classes) if classes else None)


def _reference(interface, reference, candidate, *, agreement=1.0):  # noqa: ANN001, ANN202
    return compare_with_reference(interface, Tolerances(), agreement, reference, candidate)


class FakeModel:
    """An InferenceClient that doubles its input, slower for early batches so answers finish out of order."""

    created: list["FakeModel"] = []
    lock = threading.Lock()
    in_flight = 0
    max_in_flight = 0

    def __init__(self) -> None:
        self.closed = False
        self.calls = 0
        with FakeModel.lock:
            FakeModel.created.append(self)

    def infer(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        with FakeModel.lock:
            FakeModel.in_flight += 1
            FakeModel.max_in_flight = max(FakeModel.max_in_flight, FakeModel.in_flight)
        x = inputs["x"]
        time.sleep(0.002 * (10 - min(int(x[0, 0]) // 8, 9)))
        self.calls += 1
        with FakeModel.lock:
            FakeModel.in_flight -= 1
        return {"y": x * 2, "first": x[:, :1].astype(np.int64)}

    def close(self) -> None:
        self.closed = True


def test_replay_keeps_golden_order_bounds_concurrency_and_closes_every_client():
    FakeModel.created, FakeModel.max_in_flight = [], 0
    golden = {"x": np.arange(100 * 3, dtype=np.float32).reshape(100, 3) // 3}

    result = replay(golden, FakeModel, batch_rows=8, concurrency=3)

    assert np.array_equal(result.outputs["y"], golden["x"] * 2)
    assert result.outputs["first"].shape == (100, 1)
    assert len(result.latencies_ms) == 13  # ceil(100 / 8); the warm-up request is not timed
    assert sum(c.calls for c in FakeModel.created) == 14
    assert FakeModel.max_in_flight <= 3
    assert len(FakeModel.created) <= 1 + 3 and all(c.closed for c in FakeModel.created)
    timing = result.timing()
    assert timing["requests"] == 13 and timing["rows"] == 100 and timing["warmup_requests"] == 1


def test_replay_refuses_a_golden_set_with_ragged_inputs():
    with pytest.raises(CanaryRejected, match=r"different row counts \{'a': 3, 'b': 2\}"):
        replay({"a": np.zeros((3, 1)), "b": np.zeros((2, 1))}, FakeModel, batch_rows=2, concurrency=1)


def test_classifier_labels_are_compared_top1_by_name_and_probabilities_numerically():
    reference = {"label": np.array([0, 2, 1], dtype=np.int64),
                 "probabilities": np.array([[0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.2, 0.7, 0.1]], dtype=np.float32)}
    candidate = {"label": np.array([[b"setosa", b"versicolor"], [b"virginica", b"setosa"], [b"setosa", b"versicolor"]], dtype=object),
                 "probabilities": reference["probabilities"] + np.float32(1e-7)}

    parity, unmatched = _reference(_classifier(), reference, candidate, agreement=0.5)

    label = parity.outputs["label"]
    assert label.kind == "label" and label.agreement == pytest.approx(2 / 3) and label.worst_rows == [2]
    assert label.passed  # 2/3 >= 0.5
    assert parity.outputs["probabilities"].passed and unmatched == []


def test_class_values_map_through_the_models_classes_not_their_position():
    reference = {"label": np.array([20, 10], dtype=np.int64)}
    candidate = {"label": np.array([[b"virginica"], [b"setosa"]], dtype=object), "probabilities": np.zeros((2, 3), np.float32)}
    parity, _ = _reference(_classifier(classes=(10, 15, 20)), reference, candidate)
    assert parity.outputs["label"].agreement == 1.0


def test_labels_named_after_the_classes_compare_class_values_as_text():
    # the assembler names labels str(class) when the spec gives none
    interface = _classifier(classes=(0, 1), labels=["0", "1"])
    reference = {"label": np.array([1, 0])}
    candidate = {"label": np.array([[b"1"], [b"1"]], dtype=object), "probabilities": np.zeros((2, 2), np.float32)}
    parity, _ = _reference(interface, reference, candidate)
    assert parity.outputs["label"].agreement == 0.5 and not parity.passed
    assert interface.label_set() == ["0", "1"]
    assert Interface(CLASSIFIER, None, [0, 1]).label_set() == ["0", "1"]


def test_a_classifier_without_its_outputs_or_with_mismatched_labels_is_rejected():
    with pytest.raises(CanaryRejected, match=r"has no output \['label'\]"):
        _reference(_classifier(), {"label": np.zeros(2)}, {"probabilities": np.zeros((2, 3))})
    with pytest.raises(CanaryRejected, match="answers 3 label names but the model has 2 classes"):
        _reference(_classifier(classes=(0, 1)), {"label": np.zeros(2, np.int64)},
                   {"label": np.array([[b"a"], [b"a"]], dtype=object), "probabilities": np.zeros((2, 3))})


def test_other_shapes_compare_outputs_present_on_both_sides_by_name():
    reference = {"score": np.array([[1.0], [2.0]], np.float32), "bucket": np.array([3, 4]), "only_native": np.zeros(2)}
    candidate = {"score": np.array([[1.0], [2.5]], np.float32), "bucket": np.array([3, 4]), "only_served": np.zeros(2)}
    parity, unmatched = _reference(Interface({}), reference, candidate)
    assert set(parity.outputs) == {"score", "bucket"}
    assert parity.outputs["bucket"].kind == "label" and parity.outputs["bucket"].passed
    assert parity.outputs["score"].failing_rows == 1 and parity.outputs["score"].max_abs == pytest.approx(0.5)
    assert unmatched == ["only_native", "only_served"]


def test_verdict_names_each_failed_gate_with_its_spec_field():
    reference = {"probabilities": np.array([[0.5, 0.5]], np.float32)}
    parity, _ = _reference(Interface({}), reference, {"probabilities": np.array([[0.6, 0.4]], np.float32)})
    timing = {"p99_ms": 12.5, "requests": 10, "batch_rows": 32, "concurrency": 4}
    expectations = {"results": [{"expectation": "expect_column_values_to_be_in_set", "column": "label",
                                 "kwargs": {"value_set": ["a"]}, "success": False, "rows": 5,
                                 "unexpected_count": 2, "unexpected_examples": ["z"]}]}

    passed, reasons = verdict(parity, timing, 10.0, expectations)

    assert not passed and len(reasons) == 3
    assert 'output "probabilities"' in reasons[0] and "atol 1e-05" in reasons[0] and "[canary.tolerances.probabilities]" in reasons[0]
    assert "p99 latency 12.500 ms" in reasons[1] and "canary.p99_ms 10 ms" in reasons[1]
    assert "on column 'label'" in reasons[2] and "2 of 5 rows" in reasons[2]
    assert verdict(None, timing, 20.0, {"results": []}) == (True, [])


def test_the_html_report_is_self_contained_and_escapes_what_it_shows(tmp_path):
    report = {"release": "iris", "release_id": "iris-1", "passed": False,
              "reasons": ['output "label" <script>alert(1)</script>'],
              "server": {"description": "CPU, python-backend onnxruntime shim", "version": "2.51.0"},
              "parity": {"label": {"kind": "label", "passed": False, "agreement": 0.5}},
              "timing": {"p99_ms": float("nan")}, "expectations": {"skipped": "off"}}
    json_path, html_path = write_reports(tmp_path, report)
    page = html_path.read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "REJECTED" in page and "CPU, python-backend onnxruntime shim" in page
    assert "http://" not in page and "https://" not in page and "<link" not in page
    assert json.loads(json_path.read_text())["timing"]["p99_ms"] == "nan"  # strict JSON, no NaN literal
    assert "PASSED" in render_html({**report, "passed": True, "reasons": []})


def test_expectations_catch_out_of_range_probabilities_unnormalised_rows_nulls_and_unknown_labels():
    outputs = {
        "probabilities": np.array([[0.2, 0.8], [1.2, -0.2], [0.3, 0.3], [np.nan, 1.0]], np.float32),
        "label": np.array([[b"a"], [b"b"], [b"zebra"], [b"a"]], dtype=object),
    }
    result = run_expectations(outputs, classifier=True, label_set=["a", "b"])
    assert result["passed"] is False
    failed = {(r["expectation"], r["column"]): r["unexpected_count"] for r in result["results"] if not r["success"]}
    assert failed == {
        ("expect_column_values_to_not_be_null", "probabilities[0]"): 1,
        ("expect_column_values_to_be_between", "probabilities[0]"): 1,
        ("expect_column_values_to_be_between", "probabilities[1]"): 1,
        ("expect_column_values_to_not_be_null", "probabilities_row_sum"): 1,
        ("expect_column_values_to_be_between", "probabilities_row_sum"): 1,
        ("expect_column_values_to_be_in_set", "label"): 1,
    }
    assert any("zebra" in line for line in failures(result))
    good = run_expectations({"probabilities": np.array([[0.25, 0.75]], np.float32),
                             "label": np.array([[b"b"]], dtype=object)}, classifier=True, label_set=["a", "b"])
    assert good["passed"] is True
