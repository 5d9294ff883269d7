"""The report people read, without services: the plots' data stays bounded, the page puts the decision
first and says why a plot is missing, and the terminal prints the same decision.

The pages rendered from real canary runs, in a real browser, are in tests/e2e/test_report_pages.py.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from model_release.canary.report import plotdata as pd
from model_release.canary.report.decision import FAILED, PASSED, SKIPPED, decision, terminal
from model_release.canary.measure.load import Histogram
from model_release.canary.report.page import render_html
from model_release.canary.judge.quality import Classified
from model_release.cli import main


# --- the plots' data is bounded whatever the golden set's size ---------------------------------------


def test_confusion_matrices_keep_at_most_max_classes_summing_the_rest() -> None:
    rng = np.random.default_rng(0)
    classes = [f"c{i:03d}" for i in range(300)]
    truth = rng.choice(classes, 100_000)
    answer = np.where(rng.random(100_000) < 0.8, truth, rng.choice(classes, 100_000))
    cm = pd.confusion(truth, answer, classes, row_title="ground truth", column_title="candidate")
    m = np.asarray(cm["matrix"])
    assert m.shape == (pd.MAX_CLASSES, pd.MAX_CLASSES) and cm["labels"][-1] == pd.OTHER
    assert m.sum() == 100_000 and cm["classes_summed"] == 300 - (pd.MAX_CLASSES - 1)
    assert len(json.dumps(cm)) < 10_000
    per = pd.per_class(truth, answer, classes)
    assert len(per["classes"]) == pd.MAX_CLASSES and all(0 <= f <= 1 for f in per["f1"])


def test_confusion_and_per_class_figures_are_right_on_a_small_case() -> None:
    truth = np.array(["a", "a", "b", "b", "b", "c"], dtype=object)
    answer = np.array(["a", "b", "b", "b", "a", "c"], dtype=object)
    cm = pd.confusion(truth, answer, ["a", "b", "c"], row_title="t", column_title="c")
    assert cm["labels"] == ["a", "b", "c"] and cm["matrix"] == [[1, 1, 0], [1, 2, 0], [0, 0, 1]]
    per = pd.per_class(truth, answer, ["a", "b", "c"])
    assert per["precision"] == [0.5, pytest.approx(2 / 3, abs=1e-6), 1.0]
    assert per["recall"] == [0.5, pytest.approx(2 / 3, abs=1e-6), 1.0] and per["support"] == [2, 3, 1]


def test_a_ground_truth_class_the_model_lacks_gets_its_own_row() -> None:
    read = Classified(served=["x", "y"], truth=np.array([0, 1, -1]), predicted=np.array([0, 1, 1]), scores=None)
    section = pd.classes_section(read, None)
    cm = section["candidate_vs_truth"]
    assert cm["labels"] == ["x", "y", pd.NOT_A_CLASS]
    assert cm["matrix"][cm["labels"].index(pd.NOT_A_CLASS)][1] == 1
    assert "champion_vs_truth" not in section and "champion" not in section["per_class"]


def test_latency_buckets_come_from_the_histogram_and_stay_few() -> None:
    h = Histogram()
    for ms in np.geomspace(0.01, 50_000, 200_000):  # every bucket from 10 us to 50 s has some
        h.record(ms / 1e3)
    data = pd.latency_buckets(h)
    assert len(data["counts"]) <= pd.MAX_LATENCY_BUCKETS and sum(data["counts"]) == h.count == data["requests"]
    assert data["upper_ms"] == sorted(data["upper_ms"]) and data["upper_ms"][-1] == pytest.approx(50_000, rel=1e-3)
    narrow = Histogram()
    for ms in (1.0, 1.0, 2.0, 4.0):
        narrow.record(ms / 1e3)
    small = pd.latency_buckets(narrow)
    assert small["bucket_octave_fraction"] == 1 / 64 and sum(small["counts"]) == 4 and len(small["counts"]) == 3


def test_residuals_parity_errors_and_histograms_are_bounded_and_add_up() -> None:
    rng = np.random.default_rng(1)
    target = rng.normal(size=50_000)
    sample = pd.residual_sample(target, target + 0.1, target - 0.1)
    assert sample["sampled"] == pd.RESIDUAL_SAMPLE and sample["values"] == 50_000 and len(sample["champion"]) == pd.RESIDUAL_SAMPLE
    native = rng.random((20_000, 3)).astype(np.float32)
    served = native + rng.normal(scale=1e-6, size=native.shape).astype(np.float32)
    served[0, 0], served[1, 1] = np.nan, native[1, 1]
    errors = pd.parity_errors(native, served, atol=1e-5, rtol=1e-4)
    assert errors["nonfinite"] == 1 and errors["zero"] >= 1
    assert sum(errors["counts"]) + errors["zero"] + errors["nonfinite"] == native.size == errors["elements"]
    assert len(errors["counts"]) == (pd.PARITY_LOG10_RANGE[1] - pd.PARITY_LOG10_RANGE[0]) * pd.PARITY_BINS_PER_DECADE
    hist = pd.numeric_histograms(target, None)
    assert sum(hist["candidate"]) == 50_000 and hist["champion"] is None and len(hist["edges"]) == pd.HISTOGRAM_BINS + 1


# --- the decision ----------------------------------------------------------------------------------


REPORT = {
    "release": "iris", "release_id": "iris-2", "passed": False, "verdict": "rejected",
    "model": {"name": "iris-classifier", "version": "3", "alias": "candidate"},
    "server": {"version": "2.51.0", "mode": "local", "description": "CPU, python-backend onnxruntime shim"},
    "champion": {"kind": "served", "name": "release iris-1 (iris-classifier v2)", "release_id": "iris-1"},
    "gates": [
        {"name": "contract", "passed": True, "setting": "promote.breaking_change", "candidate": "1 break(s), acknowledged",
         "champion": "release iris-1 (iris-classifier v2)", "limit": "acknowledged", "message": "acknowledged"},
        {"name": "quality.accuracy", "passed": False, "setting": "canary.quality.accuracy", "candidate": 0.86,
         "champion": 0.9733, "limit": ">= 0.9", "message": "accuracy of the served candidate is 0.86"},
        {"name": "load.slo_p99", "passed": None, "setting": "canary.p99_ms", "skipped": "no absolute SLO set",
         "message": "skipped"},
        {"name": "parity.probabilities", "passed": True, "setting": "canary.tolerances.probabilities", "candidate": 1.2e-7,
         "limit": "atol 1e-05 or rtol 0.0001", "message": "0 of 450 elements outside both tolerances"},
        {"name": "expectations", "passed": True, "setting": "canary.expectations", "candidate": "1 of 1 met",
         "limit": "all met", "message": "every expectation on the served outputs is met"},
    ],
    "parity": {"probabilities": {"kind": "numeric", "passed": True, "max_abs": 1.2e-7, "atol": 1e-5, "rtol": 1e-4,
                                 "failing_elements": 0, "total_elements": 450}},
    "expectations": {"results": [{"expectation": "expect_column_values_to_be_in_set", "column": "label", "success": True}]},
    "quality": {"task": "classification", "candidate": {"accuracy": 0.86}, "champion": {"accuracy": 0.9733}},
    "acknowledgements": [{"setting": "promote.breaking_change", "text": "gateway sends 8 rows", "meaning": "break acknowledged"}],
    "reasons": ["accuracy of the served candidate is 0.86 [canary.quality.accuracy]"],
}


def test_the_decision_lists_failed_gates_first_parity_and_expectations_among_them() -> None:
    d = decision(REPORT)
    assert not d.passed and d.verdict == "rejected"
    assert [line.status for line in d.lines] == [FAILED, PASSED, PASSED, PASSED, SKIPPED]
    first = d.lines[0]
    assert (first.name, first.candidate, first.limit, first.champion) == ("quality.accuracy", "0.86", ">= 0.9", "0.9733")
    names = [line.name for line in d.lines]
    assert "parity.probabilities" in names and "expectations" in names
    parity = next(line for line in d.lines if line.name == "parity.probabilities")
    assert (parity.candidate, parity.limit, parity.champion) == ("max abs 1.2e-07", "atol 1e-05 or rtol 0.0001", "-")
    assert next(line for line in d.lines if line.name == "contract").champion == "its interface"
    change = d.changes[0]
    assert (change.title, change.delta, change.better) == ("accuracy", "-0.1133", False)


def test_the_page_opens_with_the_decision_and_says_why_each_missing_plot_is_missing() -> None:
    page = render_html({**REPORT, "quality": {"skipped": "no ground truth: golden.target is not set"},
                        "champion": {"kind": "none", "reason": "this is its first release"}})
    head = page[: page.index("<h2>")]
    assert "REJECTED" in head and "Blocked: 1 gate(s) failed" in head and "quality.accuracy" in head
    assert "gateway sends 8 rows" in head and "Why it was rejected" in head
    assert "Content-Security-Policy" in page and "default-src 'none'" in page and "<script" not in page
    placeholders = dict(re.findall(r"<figure class='plot none' data-plot='([^']+)'><div class='placeholder'>([^<]*)<", page))
    assert placeholders["confusion-candidate"].startswith("No ground truth: golden.target is not set")
    assert placeholders["confusion-agreement"] == "No champion: this is its first release"
    assert placeholders["tuning"].startswith("tuning was off")
    assert "<svg" not in page  # nothing measured here, so nothing drawn: every plot's place says why


def test_the_page_draws_each_plot_from_report_json_alone() -> None:
    histogram = Histogram()
    for ms in (1.0, 2.0, 2.5, 9.0):
        histogram.record(ms / 1e3)
    read = Classified(served=["a", "b"], truth=np.array([0, 1, 1, 0]), predicted=np.array([0, 1, 0, 0]), scores=None)
    plots = {
        "classes": pd.classes_section(read, read),
        **pd.agreement_section(np.array(["a", "b", "a", "a"], dtype=object), np.array(["a", "b", "b", "a"], dtype=object), ["a", "b"]),
        "latency": {"source": "load phase", "candidate": pd.latency_buckets(histogram), "champion": pd.latency_buckets(histogram)},
        "parity_errors": {"probabilities": pd.parity_errors(np.ones((4, 2)), np.ones((4, 2)) + 1e-7, atol=1e-5, rtol=1e-4)},
    }
    tuning = {"trials": [{"setting": {"instances": 1}, "throughput_rows_per_s": 100.0, "p99_ms": 5.0, "errors": 0},
                         {"setting": {"instances": 2}, "throughput_rows_per_s": 150.0, "p99_ms": 6.0, "errors": 0}],
              "chosen": {"instances": 2}, "p99_limit_ms": 7.0}
    page = render_html({**REPORT, "plots": json.loads(json.dumps(plots)), "tuning": tuning,
                        "quality": {"task": "classification", "candidate": {"accuracy": 0.75}, "champion": {"accuracy": 0.75}}})
    drawn = re.findall(r"<figure class='plot' data-plot='([^']+)'><svg ", page)
    assert drawn == ["confusion-candidate", "confusion-champion", "per-class", "confusion-agreement", "predicted",
                     "latency-cdf", "tuning", "parity-probabilities"]
    assert "http://" not in page and "https://" not in page and "xlink:href" in page  # markers, read by the HTML parser


# --- the terminal ----------------------------------------------------------------------------------


def test_the_terminal_prints_one_line_per_gate_and_colours_only_when_asked() -> None:
    plain = terminal(REPORT)
    assert "\033[" not in plain
    lines = plain.splitlines()
    assert lines[0].startswith("REJECTED  iris (iris-2): blocked: 1 gate(s) failed")
    failed = next(line for line in lines if "quality.accuracy" in line)
    assert failed.startswith("✗ ") and "0.86" in failed and ">= 0.9" in failed and "0.9733" in failed
    assert any(line.startswith("- load.slo_p99") and "skipped: no absolute SLO set" in line for line in lines)
    assert "acknowledged: promote.breaking_change: 'gateway sends 8 rows'" in plain
    assert "\033[31mREJECTED" in terminal(REPORT, colour=True)


def test_model_release_report_prints_the_decision_and_exits_3_when_rejected(tmp_path, capsys) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(REPORT))
    assert main(["report", str(path)]) == 3
    out = capsys.readouterr().out
    assert out.startswith("REJECTED") and "\033[" not in out  # not a terminal: no colour
    passing = [{**g, "passed": True, "outcome": "passed"} if g.get("passed") is False else g for g in REPORT["gates"]]
    path.write_text(json.dumps({**REPORT, "passed": True, "verdict": "passed", "reasons": [], "gates": passing}))
    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("PASSED")
    assert main(["report", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["release_id"] == "iris-2"


@pytest.mark.parametrize("report", [  # the envelope the CLI checks (a release id, a list of gates), odd contents
    {"passed": False, "release_id": "r", "gates": [], "parity": [1], "quality": [], "shift": "x", "slo": 3, "reasons": "why"},
    {"passed": True, "release_id": "r", "gates": [1, None, {"name": 2}], "parity": {"a": 1},
     "expectations": {"results": [1]}, "load_phase": {"candidate": 1}, "acknowledgements": ["x"], "champion": 5, "model": "m"},
    {"verdict": "rejected", "release_id": "r", "gates": [],
     "quality": {"task": "classification", "candidate": {"accuracy": "x", "unknown": 1}, "champion": []}},
])
def test_a_report_of_the_wrong_shape_prints_what_it_holds_instead_of_failing(report, tmp_path, capsys) -> None:
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert main(["report", str(tmp_path)]) == (0 if report.get("passed") else 3)
    captured = capsys.readouterr()
    assert captured.out.startswith("PASSED" if report.get("passed") else "REJECTED") and captured.err == ""


def test_the_terminal_escapes_control_characters_and_redacts_what_a_report_holds(tmp_path, capsys) -> None:
    hostile = {**REPORT, "release": "iris\033[2J", "reasons": ["see https://user:hunter2@mlflow.example/x\n\033[31mfake"],
               "gates": [{"name": "quality\u202eaccuracy", "passed": False, "candidate": 0.5, "limit": "\033]0;title\a"}]}
    (tmp_path / "report.json").write_text(json.dumps(hostile))
    assert main(["report", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "\033" not in out and "\u202e" not in out and "\a" not in out and "hunter2" not in out
    assert "iris\\x1b[2J" in out and "quality\\u202eaccuracy" in out and "https://***@mlflow.example/x" in out


def test_figures_read_plainly_and_gates_against_the_champion_name_what_they_compare() -> None:
    from model_release.canary.report.decision import number

    assert (number(13997.4, "rows/s"), number(11345.0), number(0.09871), number(20.99, "ms")) == (
        "13,997 rows/s", "11,345", "0.09871", "20.99 ms")
    report = {"passed": True, "gates": [
        {"name": "champion.agreement", "passed": True, "candidate": 0.99, "champion": 1.0, "limit": ">= 0.9"},
        {"name": "champion.psi", "passed": True, "candidate": 0.01, "champion": 0.0, "limit": "<= 0.25"},
        {"name": "champion.ks", "passed": True, "candidate": 0.05, "champion": 0.0, "limit": "<= 0.5"},
        {"name": "quality.rmse", "passed": True, "candidate": 50.1, "champion": 51.2, "limit": "at most 5% worse"}]}
    champion = {line.name: line.champion for line in decision(report).lines}
    assert champion == {"champion.agreement": "its labels", "champion.psi": "its class mix", "champion.ks": "its predictions",
                        "quality.rmse": "51.2"}
