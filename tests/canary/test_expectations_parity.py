"""The native expectations engine gives great-expectations' own results on the same outputs.

Each case runs the canary's suite through both engines (``canary.expectations_engine``) and requires
the same results, result by result: which expectation on which column, success, the row count, the
unexpected count and the first unexpected values, in the same order. The cases are the edges of each
expectation (a bound met exactly, a hair outside it, NaN and None, inf, a label outside the set, more
unexpected values than a result keeps, no rows) and seeded random outputs with those faults mixed in.
"""

from __future__ import annotations

import numpy as np
import pytest

from model_release.canary.judge.expect import ROW_SUM_TOLERANCE, SUITE_NAME, run_expectations
from model_release.errors import SpecError
from model_release.spec import parse_spec

LABELS = ["setosa", "versicolor", "virginica"]
BASE = {"name": "iris", "model": {"name": "iris-classifier", "alias": "candidate"}}


def _both(outputs: dict[str, np.ndarray], *, classifier: bool = True, label_set: list[str] | None = LABELS) -> tuple[dict, dict]:
    native = run_expectations(outputs, classifier=classifier, label_set=label_set)
    library = run_expectations(outputs, classifier=classifier, label_set=label_set, engine="great_expectations")
    return native, library


def _assert_same(outputs: dict[str, np.ndarray], **kwargs) -> dict:  # noqa: ANN003
    native, library = _both(outputs, **kwargs)
    assert native["results"] == library["results"]
    assert native["passed"] is library["passed"]
    assert native["suite"] == library["suite"]
    assert native["engine"].startswith("native") and library["engine"].startswith("great_expectations ")
    return native


def _labels(*values: object) -> np.ndarray:
    return np.array([[v] for v in values], dtype=object)


def _failed(result: dict) -> dict[tuple[str, str], int]:
    return {(r["expectation"], r["column"]): r["unexpected_count"] for r in result["results"] if not r["success"]}


def test_a_clean_classifier_output_passes_both_engines_with_every_expectation_met() -> None:
    probs = np.array([[0.1, 0.2, 0.7], [1.0, 0.0, 0.0], [0.25, 0.25, 0.5]], np.float32)
    result = _assert_same({"probabilities": probs, "label": _labels(b"virginica", b"setosa", b"virginica")})
    assert result["passed"] is True and len(result["results"]) == 10  # 3 x (null, range) + sum x 2 + label x 2


def test_nulls_out_of_range_values_bad_sums_and_unknown_labels_fail_alike() -> None:
    probs = np.array([[0.2, 0.8, 0.0], [1.2, -0.2, 0.0], [0.3, 0.3, 0.0], [np.nan, 1.0, 0.0], [np.inf, 0.0, 0.0]], np.float32)
    result = _assert_same({"probabilities": probs, "label": _labels(b"setosa", None, b"zebra", b"setosa", np.nan)})
    assert _failed(result) == {
        ("expect_column_values_to_not_be_null", "probabilities[0]"): 1,
        ("expect_column_values_to_be_between", "probabilities[0]"): 2,  # 1.2 and inf; NaN is left to not_be_null
        ("expect_column_values_to_be_between", "probabilities[1]"): 1,
        ("expect_column_values_to_not_be_null", "probabilities_row_sum"): 1,
        ("expect_column_values_to_be_between", "probabilities_row_sum"): 2,
        ("expect_column_values_to_not_be_null", "label"): 1,  # None
        ("expect_column_values_to_be_in_set", "label"): 2,  # "zebra", and a float NaN in a string output reads "nan"
    }


@pytest.mark.parametrize("edge", [0.0, 1.0, -1e-12, 1.0 + 1e-12, -0.0])
def test_a_probability_at_or_a_hair_past_a_bound_is_judged_alike(edge: float) -> None:
    probs = np.array([[edge, 1.0 - edge], [0.5, 0.5]], np.float64)
    result = _assert_same({"probabilities": probs})
    assert result["passed"] is (0.0 <= edge <= 1.0)


@pytest.mark.parametrize("off", [0.5, 0.999, 1.0, 1.001, 2.0])
def test_a_row_sum_just_inside_and_just_outside_the_tolerance_is_judged_alike(off: float) -> None:
    delta = off * ROW_SUM_TOLERANCE
    probs = np.array([[0.5, 0.5], [0.5, 0.5 + delta]], np.float64)
    result = _assert_same({"probabilities": probs})
    sums = [r for r in result["results"] if r["column"] == "probabilities_row_sum" and r["expectation"].endswith("between")]
    assert sums[0]["success"] is bool(probs[1].sum() <= 1.0 + ROW_SUM_TOLERANCE)
    if off != 1.0:  # exactly at the tolerance, float rounding decides; both engines round alike (above)
        assert sums[0]["success"] is (off < 1.0)


def test_more_unexpected_values_than_a_result_keeps_lists_the_same_first_ones() -> None:
    probs = np.column_stack([np.linspace(1.01, 2.0, 60), np.linspace(-1.0, 0.0, 60)])
    result = _assert_same({"probabilities": probs, "label": _labels(*(f"class{i}" for i in range(60)))})
    by = {(r["expectation"], r["column"]): r for r in result["results"]}
    assert by[("expect_column_values_to_be_between", "probabilities[0]")]["unexpected_count"] == 60
    assert by[("expect_column_values_to_be_between", "probabilities[0]")]["unexpected_examples"] == pytest.approx(list(probs[:5, 0]))
    assert by[("expect_column_values_to_be_in_set", "label")]["unexpected_examples"] == [f"class{i}" for i in range(5)]


def test_a_regression_output_and_an_extra_output_check_nulls_only_alike() -> None:
    out = {"variable": np.array([1.5, np.nan, -3e30, np.inf], np.float32),
           "embedding": np.arange(8 * 70, dtype=np.int64).reshape(8, 70)[:4]}
    result = _assert_same(out, classifier=False, label_set=None)
    assert _failed(result) == {("expect_column_values_to_not_be_null", "variable"): 1}
    assert len(result["results"]) == 1 + 64  # at most 64 element columns per output


def test_no_rows_pass_alike() -> None:
    result = _assert_same({"probabilities": np.zeros((0, 3), np.float32), "label": np.zeros((0, 1), dtype=object)})
    assert result["passed"] is True and {r["rows"] for r in result["results"]} == {0}


@pytest.mark.parametrize("seed", range(12))
def test_seeded_random_outputs_with_faults_mixed_in_are_judged_alike(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, classes = int(rng.integers(1, 120)), int(rng.integers(2, 6))
    logits = rng.normal(size=(rows, classes))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    probs = probs.astype(rng.choice([np.float32, np.float64]))
    faults = rng.random(probs.shape)
    probs[faults < 0.03] = np.nan
    probs[(faults >= 0.03) & (faults < 0.05)] = rng.choice([1.5, -0.1, np.inf, -np.inf])
    probs[(faults >= 0.05) & (faults < 0.08)] *= 1.0 + rng.choice([1e-5, 3e-4])  # sums just inside or outside
    names = [f"c{i}" for i in range(classes)]
    label = [names[int(i)] for i in probs.argmax(axis=1)]
    for i in np.flatnonzero(rng.random(rows) < 0.05):
        label[i] = rng.choice([None, "unknown", ""])
    result = _assert_same({"probabilities": probs, "label": _labels(*label), "score": rng.normal(size=(rows,))},
                          label_set=names)
    assert result["suite"]["name"] == SUITE_NAME


def test_an_unknown_engine_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"expectations engine 'gx' is not one of native, great_expectations; "
                                         r"set canary.expectations_engine"):
        run_expectations({"probabilities": np.ones((1, 1))}, classifier=True, label_set=None, engine="gx")


def test_the_spec_chooses_the_engine_native_by_default() -> None:
    assert parse_spec(BASE).canary.expectations_engine == "native"
    chosen = parse_spec({**BASE, "canary": {"expectations_engine": "great_expectations"}})
    assert chosen.canary.expectations_engine == "great_expectations"
    with pytest.raises(SpecError, match=r"canary.expectations_engine.*'native' or 'great_expectations'"):
        parse_spec({**BASE, "canary": {"expectations_engine": "gx"}})
