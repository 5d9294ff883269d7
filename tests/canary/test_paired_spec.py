"""The paired gates' settings in the release spec: parsed strictly, named as the findings name them, and deciding.

``canary.confidence``, ``canary.champion.max_negative_flips``, ``canary.classes``, ``canary.calibration``
and ``golden.slices`` reach the paired gates through :func:`limits_from_spec` and the judge; each is
checked at its boundary (just inside and just outside) on served outputs.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

from model_release.canary.champion import SERVED, Champion
from model_release.canary.judge import gates as gt
from model_release.canary.judge import judging
from model_release.canary.judge.compare import Interface
from model_release.canary.judge.paired_gates import paired_quality_gates, report_only_likeness
from model_release.canary.judge.paired_quality import PairedLimits, limits_from_spec
from model_release.canary.served import Golden
from model_release.errors import SpecError
from model_release.spec import ReleaseSpec, parse_spec
from model_release.spec.paired import SETTINGS

LABELS = ["setosa", "versicolor", "virginica"]
SERVED_IFACE = Interface({"label": "label", "probabilities": "probabilities"}, LABELS, [0, 1, 2])
JUDGE = Path(__file__).resolve().parents[2] / "plugins" / "model_release" / "canary" / "judge"


def _spec(canary: dict | None = None, golden: dict | None = None) -> ReleaseSpec:
    data = {"name": "iris", "model": {"name": "m", "alias": "candidate"}, "canary": canary or {}}
    if golden is not None:
        data["golden"] = golden
    return parse_spec(data)


def _outputs(predicted: np.ndarray, top: float = 0.9) -> dict[str, np.ndarray]:
    """Label names and class scores: ``top`` on the answered class, the rest shared by the others."""
    scores = np.full((len(predicted), 3), (1 - top) / 2)
    scores[np.arange(len(predicted)), predicted] = top
    return {"label": np.array([[LABELS[i].encode()] for i in predicted], dtype=object), "probabilities": scores}


def _case(rows: int = 1200, worse: int = 0, rare: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(truth names, candidate's answers, champion's answers): the champion right on every row; the candidate
    wrong on ``worse`` rows spread over the first two classes and on ``rare`` rows of virginica."""
    truth = np.repeat([0, 1, 2], rows // 3)
    champion = truth.copy()
    candidate = truth.copy()
    spread = np.flatnonzero(truth < 2)[:: max(1, (2 * rows // 3) // max(worse, 1))][:worse]
    candidate[spread] = (truth[spread] + 1) % 3
    virginica = np.flatnonzero(truth == 2)[:rare]
    candidate[virginica] = 0
    return np.array([LABELS[t] for t in truth]), candidate, champion


def _gates(spec: ReleaseSpec, truth: np.ndarray, candidate: np.ndarray, champion: np.ndarray | None, *,
           top: float = 0.9, champion_top: float = 0.9, slices: dict[str, np.ndarray] | None = None):  # noqa: ANN202
    theirs = _outputs(champion, champion_top) if champion is not None else None
    gates, section = paired_quality_gates(spec.canary, "classification", SERVED_IFACE, _outputs(candidate, top), truth,
                                          SERVED_IFACE if theirs else None, theirs, champion_name="iris-1", slices=slices)
    return {g.name: g for g in gates}, section


def _finding(section: dict, name: str) -> dict:
    return next(f for f in section["findings"] if f["name"] == name)


# --- parsing -----------------------------------------------------------------------------------------------


def test_the_defaults_are_the_paired_gates_own():
    spec = _spec()
    limits, old = limits_from_spec(spec.canary, "classification"), PairedLimits()
    assert {f.name: getattr(limits, f.name) for f in dataclasses.fields(PairedLimits) if f.name != "drops"} == {
        f.name: getattr(old, f.name) for f in dataclasses.fields(PairedLimits) if f.name != "drops"}
    assert spec.canary.confidence == 0.95 and spec.canary.champion.max_negative_flips == 0.05
    assert (spec.canary.classes.min_support, spec.canary.classes.max_recall_drop, spec.canary.classes.enabled) == (30, 0.05, True)
    assert (spec.canary.calibration.max_ece, spec.canary.calibration.max_ece_increase) == (None, None)
    assert spec.golden.slices == []


def test_every_setting_reaches_the_limits():
    spec = _spec({"confidence": 0.99, "champion": {"max_negative_flips": 0.02},
                  "classes": {"min_support": 50, "max_recall_drop": 0.1, "max_precision_drop": None},
                  "calibration": {"max_ece": 0.08, "max_ece_increase": 0.02, "bins": 15}})
    limits = limits_from_spec(spec.canary, "classification")
    assert (limits.confidence, limits.max_negative_flips, limits.min_class_support) == (0.99, 0.02, 50)
    assert (limits.max_recall_drop, limits.max_precision_drop) == (0.1, None)
    assert (limits.max_ece, limits.max_ece_increase, limits.bins) == (0.08, 0.02, 15)
    off = limits_from_spec(_spec({"classes": {"enabled": False}, "champion": {"max_negative_flips": None}}).canary, "classification")
    assert (off.max_recall_drop, off.max_precision_drop, off.max_negative_flips) == (None, None, None)
    assert limits_from_spec(spec.canary, "classification", confidence=0.9).confidence == 0.9  # a keyword still overrides


@pytest.mark.parametrize(("canary", "golden", "message"), [
    ({"confidence": 0.5}, None, "canary.confidence: 0.5 is not between 0.5 and 1 (both excluded); give e.g. 0.95"),
    ({"confidence": 1}, None, "canary.confidence: 1 is not between 0.5 and 1 (both excluded)"),
    ({"confidence": True}, None, "canary.confidence: true is a boolean, not a number"),
    ({"champion": {"max_negative_flips": -0.01}}, None, "canary.champion.max_negative_flips: Input should be greater than or equal to 0"),
    ({"champion": {"max_negative_flips": 1.5}}, None, "canary.champion.max_negative_flips: Input should be less than or equal to 1"),
    ({"classes": {"min_support": 0}}, None, "canary.classes.min_support: Input should be greater than or equal to 1"),
    ({"classes": {"max_recall_drop": 2}}, None, "canary.classes.max_recall_drop: Input should be less than or equal to 1"),
    ({"classes": {"max_precision_drop": -1}}, None, "canary.classes.max_precision_drop: Input should be greater than or equal to 0"),
    ({"classes": {"enabled": "sometimes"}}, None, "canary.classes.enabled: Input should be a valid boolean"),
    ({"classes": {"min_rows": 3}}, None, "unknown field 'canary.classes.min_rows'"),
    ({"calibration": {"max_ece": 1.5}}, None, "canary.calibration.max_ece: Input should be less than or equal to 1"),
    ({"calibration": {"max_ece_increase": -0.1}}, None, "canary.calibration.max_ece_increase: Input should be greater than or equal to 0"),
    ({"calibration": {"bins": 1}}, None, "canary.calibration.bins: Input should be greater than or equal to 2"),
    ({"calibration": {"max_log_loss": 1}}, None, "unknown field 'canary.calibration.max_log_loss'"),
    (None, {"source": "file", "path": "g.npz", "slices": ["region"]},
     "golden: Value error, golden.slices ['region'] gate each slice against the ground truth, which this spec lacks; set golden.target"),
    (None, {"source": "file", "path": "g.npz", "target": "y", "slices": ["y"]}, "golden.slices names the target column 'y'"),
    (None, {"source": "file", "path": "g.npz", "target": "y", "slices": ["a", "a"]}, "golden.slices names 'a' more than once"),
    (None, {"source": "file", "path": "g.npz", "target": "y", "slices": [""]}, "golden.slices: '' is not a column name"),
    (None, {"source": "file", "path": "g.npz", "target": "y", "slices": "region"}, "golden.slices: Input should be a valid list"),
])
def test_a_bad_setting_is_refused_naming_its_field(canary, golden, message):
    with pytest.raises(SpecError) as err:
        _spec(canary, golden)
    assert message.removeprefix("golden: Value error, ") in str(err.value)
    assert str(err.value).count(";") < 6  # one line per bad field, not pydantic's dump


def _field_at(model: type[BaseModel], dotted: list[str]) -> bool:
    """Whether ``dotted`` (setting parts, a dict field's key included) names a field under ``model``."""
    annotation: typing.Any = model
    for part in dotted:
        annotation = next((a for a in typing.get_args(annotation) if a is not type(None)), annotation) \
            if typing.get_origin(annotation) in (typing.Union, __import__("types").UnionType) else annotation
        if typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]  # ``part`` is a key (a metric's name)
            continue
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)) or part not in annotation.model_fields:
            return False
        annotation = annotation.model_fields[part].annotation
    return True


def _message_settings() -> set[str]:
    """Every ``canary.<...>`` / ``golden.<...>`` a judge module's strings name (docstrings aside)."""
    import re

    found = set()
    for path in JUDGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found |= {m.rstrip(".") for m in re.findall(r"\b(?:canary|golden)\.[a-z_][a-z0-9_.]*", node.value)}
    return found


def test_every_setting_a_finding_names_is_a_field_of_the_spec():
    named = _message_settings() | set(SETTINGS)
    assert {"canary.champion.max_negative_flips", "golden.min_rows", "canary.quality"} <= named  # the scan finds them
    always_on = {"canary.nonfinite"}  # the non-finite gate's "setting" says it has none: "canary.nonfinite (always on)"
    assert sorted(s for s in named - always_on if not _field_at(ReleaseSpec, s.split("."))) == []


# --- each setting at its boundary ------------------------------------------------------------------------


def test_confidence_decides_a_drop_the_rows_show_at_95_but_not_at_99_percent():
    truth, candidate, champion = _case(worse=75)  # 75 of 1200 rows flipped: 6.25% against the 5% allowed
    at95, _ = _gates(_spec(), truth, candidate, champion)
    at99, section = _gates(_spec({"confidence": 0.99}), truth, candidate, champion)
    assert at95["flips.negative"].passed is False and "beyond canary.champion.max_negative_flips 5.00%" in at95["flips.negative"].message
    assert at99["flips.negative"].passed is True and "with 99% confidence" in at99["flips.negative"].message
    assert _finding(section, "flips.negative")["data"]["negative_share"]["confidence"] == 0.99


def test_max_negative_flips_just_inside_and_just_outside_the_lower_bound():
    truth, candidate, champion = _case(worse=75)
    _, section = _gates(_spec(), truth, candidate, champion)
    lower = _finding(section, "flips.negative")["data"]["negative_share"]["lower"]
    outside, _ = _gates(_spec({"champion": {"max_negative_flips": lower - 1e-6}}), truth, candidate, champion)
    inside, _ = _gates(_spec({"champion": {"max_negative_flips": lower + 1e-6}}), truth, candidate, champion)
    assert outside["flips.negative"].passed is False and inside["flips.negative"].passed is True


def test_without_the_flips_gate_agreement_and_psi_gate_again():
    truth, candidate, champion = _case(worse=75)
    spec = _spec({"champion": {"max_negative_flips": None}})
    gates, section = _gates(spec, truth, candidate, champion)
    assert "flips.negative" not in gates and "flips" not in section
    likeness = gt.agreement_gates(spec, {"agreement": 0.5, "psi": 0.0, "candidate_frequencies": {}, "champion_frequencies": {}},
                                  "iris-1", "")
    judged = [g.name for g in report_only_likeness([*gates.values(), *likeness])]
    assert {"champion.agreement", "champion.psi"} <= set(judged)
    flips_on, _ = _gates(_spec(), truth, candidate, champion)
    assert "champion.agreement" not in [g.name for g in report_only_likeness([*flips_on.values(), *likeness])]


def test_min_support_gates_a_class_of_exactly_that_many_rows_and_not_one_fewer():
    truth, candidate, champion = _case(rows=120)  # 40 rows per class
    _, gated = _gates(_spec({"classes": {"min_support": 40}}), truth, candidate, champion)
    _, not_gated = _gates(_spec({"classes": {"min_support": 41}}), truth, candidate, champion)
    assert gated["classes"][2]["recall_outcome"] == "pass"
    assert not_gated["classes"][2]["recall_outcome"] is None
    assert "fewer than the 41 a class needs to be gated (canary.classes.min_support)" in not_gated["classes"][2]["recall_not_gated"]


def test_max_recall_drop_just_inside_and_just_outside_a_collapsing_class():
    truth, candidate, champion = _case(rare=120)  # 120 of virginica's 400 rows now answered setosa
    gates, _ = _gates(_spec(), truth, candidate, champion)
    assert gates["classes"].passed is False and "recall of class 'virginica'" in gates["classes"].message
    # the bound of 3 recall gates sharing the confidence (the precision gates off, as below)
    _, section = _gates(_spec({"classes": {"max_precision_drop": None}}), truth, candidate, champion)
    lower = _finding(section, "class.recall[virginica]")["data"]["drop"]["lower"]
    outside, _ = _gates(_spec({"classes": {"max_recall_drop": lower - 1e-6, "max_precision_drop": None}}), truth, candidate, champion)
    inside, _ = _gates(_spec({"classes": {"max_recall_drop": lower + 1e-6, "max_precision_drop": None}}), truth, candidate, champion)
    assert outside["classes"].passed is False and "beyond canary.classes.max_recall_drop" in outside["classes"].message
    assert inside["classes"].passed is True


def test_classes_enabled_false_turns_the_class_gates_off_and_keeps_the_table():
    truth, candidate, champion = _case(rare=120)
    gates, section = _gates(_spec({"classes": {"enabled": False}}), truth, candidate, champion)
    assert "classes" not in gates and [r["class"] for r in section["classes"]] == LABELS
    assert section["classes"][2]["recall_outcome"] is None


def test_max_ece_just_inside_and_just_outside_its_lower_bound_with_or_without_a_champion():
    truth, candidate, _ = _case(worse=200)  # scores of 0.9 on rows of which 1/6 are wrong: overconfident
    _, section = _gates(_spec({"calibration": {"max_ece": 0.5}}), truth, candidate, None)
    lower = _finding(section, "calibration.ece")["data"]["ece"]["lower"]
    outside, _ = _gates(_spec({"calibration": {"max_ece": lower - 1e-6}}), truth, candidate, None)
    inside, _ = _gates(_spec({"calibration": {"max_ece": lower + 1e-6}}), truth, candidate, None)
    assert outside["calibration.ece"].passed is False and "beyond canary.calibration.max_ece" in outside["calibration.ece"].message
    assert inside["calibration.ece"].passed is True
    assert "calibration.ece" not in _gates(_spec(), truth, candidate, None)[0]  # off by default


def test_max_ece_increase_just_inside_and_just_outside_and_bins_shape_the_diagram():
    truth, candidate, champion = _case(worse=200)
    spec = _spec({"calibration": {"max_ece_increase": 0.5, "bins": 20}})
    _, section = _gates(spec, truth, candidate, champion, top=0.99, champion_top=0.9)
    assert len(section["reliability"]["candidate"]["bins"]) == 20
    lower = _finding(section, "calibration.ece_change")["data"]["ece_increase"]["lower"]
    outside, _ = _gates(_spec({"calibration": {"max_ece_increase": lower - 1e-6}}), truth, candidate, champion, top=0.99)
    inside, _ = _gates(_spec({"calibration": {"max_ece_increase": lower + 1e-6}}), truth, candidate, champion, top=0.99)
    assert outside["calibration.ece_change"].passed is False and inside["calibration.ece_change"].passed is True


# --- golden.slices through the judge ---------------------------------------------------------------------


def _judged(spec: ReleaseSpec, truth: np.ndarray, candidate: np.ndarray, champion: np.ndarray, slices: dict[str, np.ndarray]):  # noqa: ANN202
    theirs = _outputs(champion)
    golden = Golden(inputs={}, reference={}, truth=truth, rows=len(truth), slices=slices)
    chosen = Champion(SERVED, "production", name="iris-1", interface=SERVED_IFACE, outputs=theirs)
    into = judging.Judgement()
    gates = judging._quality(spec, SERVED_IFACE, _outputs(candidate), golden, chosen, theirs, into)
    return {g.name: g for g in gates}, into.quality["paired"]


def _region(rows: int = 3000) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A region column; the candidate loses 30 of south's 600 rows (5%), 1% of all rows."""
    truth, candidate, champion = _case(rows=rows)
    region = np.array((["north"] * 4 + ["south"]) * (rows // 5))
    south = np.flatnonzero(region == "south")[:30]
    candidate[south] = (candidate[south] + 1) % 3
    return truth, candidate, champion, region


def test_a_slice_that_collapses_blocks_one_slices_gate_naming_it_while_the_whole_passes():
    truth, candidate, champion, region = _region()
    spec = _spec(golden={"source": "file", "path": "g.npz", "target": "y", "slices": ["region"]})
    gates, paired = _judged(spec, truth, candidate, champion, {"region": region})
    assert gates["quality.accuracy"].passed is True and gates["flips.negative"].passed is True
    assert gates["slices"].passed is False and gates["slices"].setting == "golden.slices"
    assert gates["slices"].message.startswith("slice region=south: ")
    assert gates["slices"].candidate == "1 of 4 slice gates blocked"  # south's accuracy; its flips (5%) are not shown beyond 5%
    assert [r["slice"] for r in paired["slices"]["region"]] == ["region=north", "region=south"]


def test_a_slice_smaller_than_min_support_is_listed_not_gated():
    truth, candidate, champion, region = _region()
    spec = _spec({"classes": {"min_support": 601}}, {"source": "file", "path": "g.npz", "target": "y", "slices": ["region"]})
    gates, paired = _judged(spec, truth, candidate, champion, {"region": region})
    assert gates["slices"].passed is True  # north (2400 rows) is gated, south (600) is not
    south = paired["slices"]["region"][1]
    assert south["rows"] == 600 and "fewer than the 601 a slice needs to be gated (canary.classes.min_support)" in south["not_gated"]
    at_600, _ = _judged(_spec({"classes": {"min_support": 600}}), truth, candidate, champion, {"region": region})
    assert at_600["slices"].passed is False  # exactly min_support rows: gated
    gates, _ = _judged(_spec({"classes": {"min_support": 2401}}), truth, candidate, champion, {"region": region})
    assert "slices" not in gates  # no slice is gated: no line in the verdict


def test_the_canary_doc_has_a_row_for_every_paired_setting():
    readme = (Path(__file__).resolve().parents[2] / "docs" / "canary.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in readme.splitlines() if line.startswith("| `")}
    assert sorted(set(SETTINGS) - rows) == []


def test_slices_the_gates_cannot_judge_are_a_skipped_gate_saying_why():
    truth, candidate, _, region = _region()
    gates, _ = _gates(_spec(), truth, candidate, None, slices={"region": region})
    assert gates["slices"].skipped == "no champion to compare each slice with"
    regressor = Interface({"variable": "y"})
    y = np.linspace(0, 1, 100).reshape(-1, 1)
    found, _ = paired_quality_gates(_spec().canary, "regression", regressor, {"y": y}, y.reshape(-1), regressor, {"y": y},
                                    champion_name="r-1", slices={"region": region[:100]})
    assert {g.name: g.skipped for g in found}["slices"].endswith("this model's task is regression")
    assert "slices" not in _gates(_spec(), truth, candidate, None)[0]  # no slices named: no line


def test_prove_turns_what_the_rows_cannot_decide_into_inconclusive_and_passes_what_they_show_within():
    # the candidate answers exactly as the champion: no drop at all, on 150 and on 15,000 rows
    small, large = _case(rows=150), _case(rows=15_000)
    assert limits_from_spec(_spec({"prove": True}).canary, "classification").prove is True
    plain, _ = _gates(_spec(), *small)
    assert plain["quality.accuracy"].passed is True  # without proof asked: no drop shown, so it passes
    proving, section = _gates(_spec({"prove": True}), *small)
    gate = proving["quality.accuracy"]
    assert gate.inconclusive and gate.passed is None
    assert "can neither show it beyond 0.01 nor rule that out" in gate.message
    needed = _finding(section, "quality.accuracy")["data"]["rows_needed"]
    assert needed > 150 and f"takes about {needed} rows" in gate.message  # what would decide it
    shown, _ = _gates(_spec({"prove": True}), *large)
    assert shown["quality.accuracy"].passed is True  # 15,000 equal rows prove the drop within 0.01
    worse = _case(rows=15_000, worse=600)  # 4% of rows worse: shown beyond 0.01 with or without proof asked
    assert _gates(_spec({"prove": True}), *worse)[0]["quality.accuracy"].passed is False
