"""Unit tests of how the canary judges a model: metrics on served outputs, gates at their boundaries,
the contract, likeness to the champion, and renaming a champion's repository."""

from __future__ import annotations

import numpy as np
import pytest

from model_release.canary.judge import gates as gt
from model_release.canary.judge import quality as q
from model_release.canary.champion import rename_literals, rename_repository
from model_release.canary.judge.compare import Interface
from model_release.canary.judge.contract import Contract, breaks
from model_release.errors import SpecError
from model_release.spec import parse_spec

LABELS = ["setosa", "versicolor", "virginica"]
SERVED = Interface({"label": "label", "probabilities": "probabilities"}, LABELS, [0, 1, 2])
BASE = {"name": "iris", "model": {"name": "m", "alias": "candidate"}}


def _spec(**canary):  # noqa: ANN003, ANN202
    return parse_spec({**BASE, "canary": canary})


def _names(*idx: int) -> np.ndarray:
    return np.array([[LABELS[i].encode()] for i in idx], dtype=object)


# --- metrics on what was served ----------------------------------------------------------------------


def test_classification_metrics_read_served_label_names_against_targets_given_as_names_or_class_values() -> None:
    outputs = {"label": _names(0, 1, 2, 2), "probabilities": np.array(
        [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.2, 0.3, 0.5]], np.float32)}
    by_name = q.served_metrics(SERVED, outputs, np.array(["setosa", "versicolor", "virginica", "versicolor"]), "c")
    by_value = q.served_metrics(SERVED, outputs, np.array([0, 1, 2, 1]), "c")
    assert by_name == by_value
    assert by_name["accuracy"] == 0.75 and by_name["balanced_accuracy"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert 0 < by_name["log_loss"] < 1 and "roc_auc" not in by_name  # AUC only for binary classifiers


def test_a_ground_truth_naming_no_class_at_all_is_a_spec_error_listing_the_classes() -> None:
    with pytest.raises(SpecError, match=r"values e\.g\. \['setosaa'\]; its classes: \['0', '1', '2', 'setosa'"):
        q.served_metrics(SERVED, {"label": _names(0), "probabilities": np.ones((1, 3))}, np.array(["setosaa"]), "the candidate")


def test_a_class_the_model_lacks_counts_as_a_miss_never_as_a_match() -> None:
    # a candidate that dropped virginica: rows whose truth is virginica are misses, and its log loss covers the rest
    two = Interface({"label": "label", "probabilities": "probabilities"}, LABELS[:2], [0, 1])
    out = {"label": _names(0, 1, 1), "probabilities": np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]], np.float32)}
    figures = q.served_metrics(two, out, np.array(["setosa", "versicolor", "virginica"]), "c")
    assert figures["accuracy"] == pytest.approx(2 / 3) and figures["rows_of_classes_the_model_lacks"] == 1.0
    assert figures["f1_macro"] < 1.0 and figures["log_loss"] == pytest.approx(-np.mean(np.log([0.9, 0.8])), rel=1e-5)


def test_binary_classifiers_get_roc_auc_and_regressors_their_errors() -> None:
    binary = Interface({"label": "label", "probabilities": "probabilities"}, ["no", "yes"], [0, 1])
    out = {"label": np.array([[b"no"], [b"yes"], [b"yes"]], dtype=object),
           "probabilities": np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6]], np.float32)}
    assert q.served_metrics(binary, out, np.array([0, 1, 0]), "c")["roc_auc"] == pytest.approx(1.0)
    regressor = Interface({"variable": "y"})
    figures = q.served_metrics(regressor, {"y": np.array([[1.0], [2.0], [4.0]])}, np.array([1.0, 2.0, 3.0]), "c")
    assert figures["rmse"] == pytest.approx(np.sqrt(1 / 3)) and figures["mae"] == pytest.approx(1 / 3)
    assert figures["max_error"] == 1.0 and figures["r2"] == pytest.approx(0.5)


def test_a_native_champion_compares_by_class_value_and_reads_targets_in_the_candidates_names() -> None:
    native = Interface({"label": "label", "probabilities": "probabilities"}, None, [0, 1, 2])
    out = {"label": np.array([0, 1, 1]), "probabilities": np.eye(3)[[0, 1, 1]]}
    figures = q.served_metrics(native, out, np.array(["setosa", "versicolor", "virginica"]), "champion", target_names=LABELS)
    assert figures["accuracy"] == pytest.approx(2 / 3)
    assert list(q.class_values(SERVED, _names(2, 0))) == ["2", "0"]


# --- likeness to the champion ------------------------------------------------------------------------


def test_label_shift_of_identical_answers_is_nothing_and_of_a_constant_predictor_is_large() -> None:
    answers = _names(0, 1, 2, 0, 1, 2)
    same = q.label_shift(answers, answers)
    assert (same["agreement"], same["psi"], same["js_distance"]) == (1.0, 0.0, 0.0)
    constant = q.label_shift(_names(0, 0, 0, 0, 0, 0), answers)
    assert constant["agreement"] == pytest.approx(2 / 6) and constant["psi"] > 1.0


def test_numeric_shift_is_zero_for_the_same_predictions_and_ks_one_for_disjoint_ones() -> None:
    a = np.linspace(0, 1, 50).reshape(-1, 1)
    assert q.numeric_shift(a, a)["ks"] == 0.0
    assert q.numeric_shift(a + 5, a)["ks"] == 1.0


def test_nonfinite_rows_are_counted_per_output() -> None:
    outputs = {"p": np.array([[0.1, np.nan], [0.2, 0.3], [np.inf, 0.0]]), "label": _names(0, 1, 2)}
    assert q.nonfinite_rows(outputs) == {"p": 2}
    gate = gt.nonfinite_gate(q.nonfinite_rows(outputs), 3)
    assert gate.failed and '"p" on 2 of 3 rows' in gate.message


# --- gates at their boundaries -------------------------------------------------------------------------


@pytest.mark.parametrize(("candidate", "passes"), [(0.96, True), (0.9599, False)])
def test_accuracy_may_drop_by_max_absolute_drop_and_not_a_bit_more(candidate, passes) -> None:
    spec = _spec(quality={"accuracy": {"max_absolute_drop": 0.01}})
    (gate,) = gt.quality_gates(spec, "classification", {"accuracy": candidate}, {"accuracy": 0.97}, "release r1")
    assert gate.passed is passes
    if not passes:
        assert "accuracy of the served candidate is 0.9599" in gate.message and "champion release r1: 0.97" in gate.message
        assert "max_absolute_drop 0.01" in gate.message and gate.setting == "canary.quality.accuracy"
        assert (gate.candidate, gate.champion) == (0.9599, 0.97)


@pytest.mark.parametrize(("candidate", "passes"), [(0.9, True), (0.8999, False)])
def test_a_value_threshold_is_mlflows_metric_threshold(candidate, passes) -> None:
    spec = _spec(quality={"accuracy": {"threshold": 0.9}})
    (gate,) = gt.quality_gates(spec, "classification", {"accuracy": candidate}, None, "none")
    assert gate.passed is passes
    assert passes or "MLflow's threshold check failed (>= 0.9)" in gate.message


@pytest.mark.parametrize(("candidate", "passes"), [(0.125, True), (0.1251, False)])
def test_a_lower_is_better_metric_may_grow_by_max_relative_drop(candidate, passes) -> None:
    spec = _spec(quality={"accuracy": None, "log_loss": {"max_relative_drop": 0.25}})
    (gate,) = gt.quality_gates(spec, "classification", {"log_loss": candidate}, {"log_loss": 0.1}, "r1")
    assert gate.name == "quality.log_loss" and gate.passed is passes


@pytest.mark.parametrize(("candidate", "passes"), [(0.75, True), (0.7499, False)])
def test_min_absolute_change_demands_an_improvement_as_in_mlflow(candidate, passes) -> None:
    # exactly representable figures: MLflow compares 0.9 + 0.05 in binary floating point, as it always does
    spec = _spec(quality={"accuracy": {"min_absolute_change": 0.25}})
    (gate,) = gt.quality_gates(spec, "classification", {"accuracy": candidate}, {"accuracy": 0.5}, "r1")
    assert gate.passed is passes


def test_without_a_champion_change_gates_are_skipped_and_value_gates_still_apply() -> None:
    spec = _spec(quality={"accuracy": {"threshold": 0.95, "max_absolute_drop": 0.01}, "f1_macro": {"max_absolute_drop": 0.0}})
    accuracy, f1 = gt.quality_gates(spec, "classification", {"accuracy": 0.9, "f1_macro": 0.9}, None, "none")
    assert accuracy.failed and "threshold" in accuracy.message
    assert f1.passed is None and "no champion figure" in f1.skipped


def test_default_gates_and_turning_one_off() -> None:
    assert [g.name for g in gt.quality_gates(_spec(), "classification", {"accuracy": 1.0}, {"accuracy": 1.0}, "r")] == ["quality.accuracy"]
    assert [g.name for g in gt.quality_gates(_spec(), "regression", {"rmse": 1.0}, {"rmse": 1.0}, "r")] == ["quality.rmse"]
    assert gt.quality_gates(_spec(quality={"accuracy": None}), "classification", {"accuracy": 0.1}, {"accuracy": 1.0}, "r") == []


@pytest.mark.parametrize(("agreement", "passes"), [(0.9, True), (0.8933, False)])
def test_agreement_with_the_champion_at_its_boundary(agreement, passes) -> None:
    shift = {"agreement": agreement, "psi": 0.01, "candidate_frequencies": {}, "champion_frequencies": {}}
    gate, psi = gt.agreement_gates(_spec(), shift, "release r1", "")
    assert gate.passed is passes and psi.passed
    assert passes or "agree with release r1's on 89.33% of the golden rows" in gate.message


@pytest.mark.parametrize(("value", "passes"), [(0.25, True), (0.2501, False)])
def test_psi_at_its_boundary(value, passes) -> None:
    shift = {"agreement": 1.0, "psi": value, "candidate_frequencies": {"a": 1.0}, "champion_frequencies": {"a": 1.0}}
    assert gt.agreement_gates(_spec(), shift, "r1", "")[1].passed is passes


def test_champion_gates_without_a_champion_are_skipped_saying_why() -> None:
    gates = gt.agreement_gates(_spec(), None, "", "channel 'production' has no release yet")
    assert [g.passed for g in gates] == [None, None] and "no release yet" in gates[0].skipped
    assert gt.ks_gate(_spec(), None, "", "why").skipped == "why"


# --- the contract ------------------------------------------------------------------------------------


def _contract(**changes) -> Contract:  # noqa: ANN003
    base = {"entry": "iris", "inputs": {"input": ("FP32", (4,))},
            "outputs": {"probabilities": ("FP32", (3,)), "label": ("BYTES", (1,))}, "max_batch_size": 64, "labels": LABELS}
    return Contract(**{**base, **changes})


@pytest.mark.parametrize(("change", "expected"), [
    ({"inputs": {"features": ("FP32", (4,))}}, ["input 'input' (FP32 [4]) was removed or renamed; the candidate takes ['features']",
                                                "input 'features' (FP32 [4]) is new and required"]),
    ({"inputs": {"input": ("FP64", (4,))}}, ["input 'input' changed type from FP32 to FP64"]),
    ({"inputs": {"input": ("FP32", (5,))}}, ["input 'input' changed dims from [4] to [5]"]),
    ({"outputs": {"probabilities": ("FP32", (2,)), "label": ("BYTES", (1,))}}, ["output 'probabilities' changed dims from [3] to [2]"]),
    ({"outputs": {"probabilities": ("FP32", (3,))}}, ["output 'label' (BYTES [1]) was removed or renamed"]),
    ({"max_batch_size": 8}, ["max_batch_size dropped from 64 to 8"]),
    ({"labels": ["setosa", "versicolor"]}, ["the label set changed: dropped ['virginica']"]),
])
def test_every_kind_of_contract_break_is_named(change, expected) -> None:
    found = breaks(_contract(), _contract(**change))
    assert len(found) == len(expected)
    for sentence, start in zip(found, expected):
        assert sentence.startswith(start), (sentence, start)


def test_compatible_changes_are_not_breaks_and_an_acknowledged_break_passes() -> None:
    more = _contract(outputs={**_contract().outputs, "answered_by": ("BYTES", (1,))}, max_batch_size=128,
                     labels=list(reversed(LABELS)))
    assert breaks(_contract(), more) == []
    found = breaks(_contract(), _contract(labels=["setosa", "versicolor"]))
    assert gt.contract_gate(_spec(), found, "r1").failed
    acked = parse_spec({**BASE, "promote": {"breaking_change": "virginica is retired"}})
    gate = gt.contract_gate(acked, found, "r1")
    assert gate.passed and "virginica is retired" in gate.message and gate.candidate == "1 break(s), acknowledged"


# --- renaming the champion's repository ------------------------------------------------------------


def test_rename_literals_replaces_only_string_literals_equal_to_a_model_name() -> None:
    source = ('SMALL = "iris_small"\nLARGE = \'iris_large\'\n# iris_small stays in comments\n'
              'x = "iris_small_not"\ny = f"{SMALL}"\nz = ["iris_large", "other"]\n')
    out = rename_literals(source, {"iris_small": "iris_small__champion", "iris_large": "iris_large__champion"})
    assert out == ("SMALL = 'iris_small__champion'\nLARGE = 'iris_large__champion'\n# iris_small stays in comments\n"
                   'x = "iris_small_not"\ny = f"{SMALL}"\nz = [\'iris_large__champion\', "other"]\n')


def test_rename_repository_renames_folders_configs_ensemble_steps_and_bls_targets(tmp_path) -> None:
    from tritonclient.grpc import model_config_pb2 as mc

    from model_release.repository import config as cfg

    src = tmp_path / "src"
    leaf = mc.ModelConfig(name="m_leaf", backend="python", max_batch_size=8)
    cfg.add_input(leaf, "x", "FP32", [2])
    cfg.add_output(leaf, "y", "FP32", [2])
    router = mc.ModelConfig(name="m", backend="python", max_batch_size=8)
    cfg.add_input(router, "x", "FP32", [2])
    cfg.add_output(router, "y", "FP32", [2])
    ens = mc.ModelConfig(name="m_ens", platform="ensemble", max_batch_size=8)
    cfg.add_input(ens, "x", "FP32", [2])
    cfg.add_output(ens, "y", "FP32", [2])
    step = ens.ensemble_scheduling.step.add(model_name="m", model_version=-1)
    step.input_map["x"], step.output_map["y"] = "x", "y"
    for config, code in ((leaf, "LEAF = 1\n"), (router, 'TARGET = "m_leaf"\nNAME = "m"\n'), (ens, None)):
        (src / config.name / "1").mkdir(parents=True)
        cfg.write_config(src / config.name / "config.pbtxt", config)
        if code:
            (src / config.name / "1" / "model.py").write_text(code)

    names = {n: n + "__champion" for n in ("m_leaf", "m", "m_ens")}
    out = rename_repository(src, tmp_path / "out", names)

    assert sorted(p.name for p in out.iterdir()) == ["m__champion", "m_ens__champion", "m_leaf__champion"]
    assert cfg.read_config(out / "m_ens__champion" / "config.pbtxt").ensemble_scheduling.step[0].model_name == "m__champion"
    assert cfg.read_config(out / "m_leaf__champion" / "config.pbtxt").name == "m_leaf__champion"
    assert (out / "m__champion" / "1" / "model.py").read_text() == "TARGET = 'm_leaf__champion'\nNAME = 'm__champion'\n"
    assert (src / "m" / "1" / "model.py").read_text() == 'TARGET = "m_leaf"\nNAME = "m"\n'  # the source is untouched
