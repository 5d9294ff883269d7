"""The parity gate's arithmetic: Polygraphy-style elementwise tolerances, NaN/Inf, labels, streaming."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model_release.errors import ParityError
from model_release.model.parity import ParityAccumulator, compare, compare_batches, raise_if_failed
from model_release.spec import Tolerances


def tol(atol: float, rtol: float, **named: dict[str, float]) -> Tolerances:
    return Tolerances.model_validate({"default": {"atol": atol, "rtol": rtol}, **named})


def one(ref, cand, tolerances, labels=None, name="y"):
    return compare({name: np.asarray(ref)}, {name: np.asarray(cand)}, tolerances, labels).outputs[name]


@pytest.mark.parametrize(("ref", "cand", "fails"), [
    (1000.0, 1000.5, False),  # abs 0.5 > atol 0.1 but rel 5e-4 <= rtol 1e-3
    (0.01, 0.05, False),  # rel 4 > rtol but abs 0.04 <= atol 0.1
    (1.0, 1.2, True),  # abs 0.2 > 0.1 and rel 0.2 > 1e-3
    (0.0, 0.05, False),  # ref 0: rel is infinite, abs within atol
    (0.0, 0.5, True),
    (-2.0, -2.0, False),
])
def test_an_element_fails_only_when_both_tolerances_are_exceeded(ref, cand, fails):
    out = one([[ref, 1.0]], [[cand, 1.0]], tol(0.1, 1e-3))
    assert out.passed is not fails
    assert out.failing_elements == int(fails) and out.failing_rows == int(fails)
    assert out.max_abs == pytest.approx(abs(cand - ref))


def test_figures_max_abs_max_rel_mean_abs_fraction_and_worst_rows():
    ref = np.array([[1.0, 2.0], [4.0, 8.0], [1.0, 1.0], [10.0, 10.0]])
    cand = ref + np.array([[0.0, 0.5], [0.1, 0.0], [0.0, 0.0], [3.0, 0.0]])
    out = one(ref, cand, tol(0.05, 0.01))
    assert out.max_abs == pytest.approx(3.0)
    assert out.max_rel == pytest.approx(0.3)
    assert out.mean_abs == pytest.approx(3.6 / 8)
    assert (out.failing_elements, out.total_elements, out.failing_rows, out.total_rows) == (3, 8, 3, 4)
    assert out.failing_fraction == pytest.approx(3 / 8)
    assert out.worst_rows == [3, 0, 1]
    assert "differs from the reference on 3 of 4 rows (3 of 8 elements; max abs 3 > atol 0.05" in out.describe()
    assert out.describe().endswith("; worst rows 3, 0, 1")  # a failure names the golden rows that differ most


def test_named_tolerance_overrides_default():
    report = compare({"a": np.array([1.0]), "b": np.array([1.0])}, {"a": np.array([1.5]), "b": np.array([1.5])},
                     tol(0.1, 0.1, b={"atol": 1.0, "rtol": 0.0}))
    assert not report.outputs["a"].passed and report.outputs["b"].passed
    assert (report.outputs["b"].atol, report.outputs["b"].rtol) == (1.0, 0.0)


@pytest.mark.parametrize(("ref", "cand", "passed", "nonfinite"), [
    ([1.0, np.nan], [1.0, np.nan], True, 0),  # NaN at NaN agrees
    ([1.0, np.inf], [1.0, np.inf], True, 0),
    ([1.0, 2.0], [1.0, np.nan], False, 1),  # NaN where the reference is finite
    ([1.0, 2.0], [np.inf, 2.0], False, 1),
    ([1.0, np.inf], [1.0, -np.inf], False, 0),  # opposite infinities
    ([1.0, np.nan], [1.0, 3.0], False, 0),  # a number where the reference is NaN
])
def test_nan_and_inf(ref, cand, passed, nonfinite):
    out = one([ref], [cand], tol(1e9, 1e9))
    assert out.passed is passed
    assert out.nonfinite == nonfinite
    if nonfinite:
        assert f"{nonfinite} NaN/Inf elements where the reference is finite" in out.describe()


def test_label_outputs_report_agreement_against_a_minimum():
    ref = np.array([0, 1, 2, 1, 0, 2, 2, 1])
    cand = np.array([0, 1, 2, 2, 0, 2, 2, 1])
    strict = one(ref, cand, tol(0, 0), {"y": 1.0})
    assert strict.kind == "label" and strict.agreement == pytest.approx(7 / 8) and not strict.passed
    assert strict.worst_rows == [3]
    assert 'output "y" agrees with the reference on 87.5000% of 8 rows (1 differ; required agreement 100.0000%); rows 3' == strict.describe()
    assert one(ref, cand, tol(0, 0), {"y": 0.8}).passed
    # strings and bytes compare by text
    assert one(np.array(["setosa", "virginica"], dtype=object), np.array([b"setosa", b"virginica"], dtype=object),
               tol(0, 0), {"y": 1.0}).agreement == 1.0


def test_missing_output_and_wrong_shape_fail_with_a_reason():
    report = compare({"a": np.zeros((2, 3)), "b": np.zeros(2)}, {"a": np.zeros((2, 4))}, tol(1, 1))
    assert report.outputs["a"].shape_error == "shape (2, 4) where the reference has (2, 3)"
    assert "the candidate has no output named 'b'" in report.outputs["b"].shape_error
    assert not report.passed and len(report.failures) == 2


def test_update_returns_the_failing_rows_of_the_batch():
    acc = ParityAccumulator(tol(0.1, 0.0), {"label": 1.0})
    mask = acc.update({"p": np.array([[1.0], [2.0], [3.0]]), "label": np.array([0, 1, 1])},
                      {"p": np.array([[1.0], [2.5], [3.0]]), "label": np.array([0, 1, 0])})
    assert mask.tolist() == [False, True, True]


def test_raise_if_failed_names_output_figures_and_hint():
    report = compare({"probabilities": np.array([[0.5, 0.5]])}, {"probabilities": np.array([[0.6, 0.4]])}, tol(1e-3, 1e-3))
    with pytest.raises(ParityError) as err:
        raise_if_failed(report, stage="canary", reference="the native model", hint="See the report.")
    assert str(err.value).startswith('canary: output "probabilities" differs from the native model on 1 of 1 rows')
    assert str(err.value).endswith("See the report.")
    raise_if_failed(compare({"p": np.ones(2)}, {"p": np.ones(2)}, tol(0, 0)), stage="x", reference="r", hint="")


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 60), cols=st.integers(1, 4), seed=st.integers(0, 2**31 - 1),
    cuts=st.lists(st.integers(1, 59), max_size=5), nan_rows=st.lists(st.integers(0, 59), max_size=3),
)
def test_streaming_equals_one_shot(rows, cols, seed, cuts, nan_rows):
    rng = np.random.default_rng(seed)
    ref = rng.normal(size=(rows, cols))
    cand = (ref + rng.normal(scale=1e-3, size=ref.shape)).astype(np.float32)
    for r in nan_rows:
        if r < rows:
            cand[r, 0] = np.nan
    labels_ref = rng.integers(0, 3, rows)
    labels_cand = np.where(rng.random(rows) < 0.1, (labels_ref + 1) % 3, labels_ref)
    tolerances = tol(1e-3, 1e-3)
    whole = compare({"p": ref, "l": labels_ref}, {"p": cand, "l": labels_cand}, tolerances, {"l": 0.5})
    bounds = sorted({0, rows, *(c for c in cuts if c < rows)})
    pairs = [({"p": ref[a:b], "l": labels_ref[a:b]}, {"p": cand[a:b], "l": labels_cand[a:b]}) for a, b in zip(bounds, bounds[1:])]
    streamed = compare_batches(pairs, tolerances, {"l": 0.5})
    for name in ("p", "l"):
        w, s = whole.outputs[name].to_dict(), streamed.outputs[name].to_dict()
        assert s.pop("mean_abs") == pytest.approx(w.pop("mean_abs"))
        if name == "l":  # label worst rows are the first failing ones, in order, either way
            assert s["worst_rows"] == w["worst_rows"]
        assert s == w


def test_a_zero_required_agreement_is_honoured_not_read_as_one() -> None:
    import numpy as np

    from model_release.model.parity import compare
    from model_release.spec import Tolerances

    ref = {"label": np.array([0, 1, 1, 0])}
    cand = {"label": np.array([1, 0, 0, 1])}
    assert compare(ref, cand, Tolerances(), {"label": 0.0}).passed
    assert not compare(ref, cand, Tolerances(), {"label": 0.5}).passed
