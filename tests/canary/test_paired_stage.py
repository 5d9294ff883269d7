"""The paired gates in the canary stage on a real tritonserver: ground truth, a native champion, NaN served outputs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from model_release.canary import run_canary
from model_release.canary.champion import NATIVE, Champion
from model_release.canary.judge.compare import Interface
from model_release.errors import CanaryRejected

from .support import INPUT, make_release

pytestmark = pytest.mark.integration


def _with_truth(release, path, slices: dict[str, np.ndarray] | None = None):  # noqa: ANN001, ANN202
    """The release with ground truth written as the export stage writes it (and ``golden.slices`` columns, when given)."""
    from sklearn.datasets import load_iris  # here: collecting make test-fast need not import scikit-learn

    np.savez(path, target=load_iris().target, **{f"slice.{c}": v for c, v in (slices or {}).items()})
    spec = release.spec
    if slices:
        from model_release.spec import GoldenSpec

        spec = spec.model_copy(update={"golden": GoldenSpec(source="file", path="g.npz", target="species",
                                                            slices=list(slices), min_rows=1)})
    return dataclasses.replace(release, spec=spec, export=dataclasses.replace(release.export, truth_path=str(path)))


def _native(answers: dict[str, np.ndarray]) -> Champion:
    return Champion(NATIVE, "production", name="production (version 0)", outputs=answers, model_version="0",
                    interface=Interface({"label": "label", "probabilities": "probabilities"}, None, [0, 1, 2]))


def _report(release) -> dict:  # noqa: ANN001
    return json.loads((release.workspace.stage_dir("canary") / "report.json").read_text())


def test_paired_gates_judge_against_the_champion_on_ground_truth_and_agreement_is_only_reported(tmp_path, iris, iris_repository):
    onnx_path, golden, reference = iris
    part = (np.arange(150) % 3).astype(str)  # golden.slices: three slices of 50 rows
    release = _with_truth(make_release(tmp_path, iris_repository, onnx_path, golden, reference), tmp_path / "truth.npz",
                          {"part": part})
    champion = {"label": reference["label"].copy(), "probabilities": reference["probabilities"].copy()}  # an equal model

    result = run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                        find_champion=lambda folder: _native(champion))

    assert result.passed
    report = _report(release)
    gates = {g["name"]: g for g in report["gates"]}
    paired = report["quality"]["paired"]
    assert gates["quality.accuracy"]["passed"] is True and "0 rows worse, 0 better" in gates["quality.accuracy"]["message"]
    assert gates["flips.negative"]["passed"] is True and gates["quality.log_loss"]["passed"] is True
    assert gates["classes"]["passed"] is True and paired["classes"][0]["recall_outcome"] == "pass"
    assert "champion.agreement" not in gates and report["shift"]["agreement"] == 1.0  # reported, not gated
    assert paired["flips"]["negative"] == 0 and len(paired["classes"]) == 3
    assert sum(b["rows"] for b in paired["reliability"]["candidate"]["bins"]) == 150
    assert gates["slices"]["passed"] is True and gates["slices"]["setting"] == "golden.slices"
    assert gates["slices"]["candidate"] == "0 of 6 slice gates blocked"  # accuracy and flips on each slice
    assert [r["slice"] for r in paired["slices"]["part"]] == ["part=0", "part=1", "part=2"]
    assert report["golden"]["slices"] == ["part"]


def test_nan_served_outputs_with_ground_truth_are_blocked_by_the_nonfinite_gate_and_the_report_is_written(
        tmp_path, iris, iris_repository):
    onnx_path, golden, reference = iris
    inputs = {INPUT: golden[INPUT].copy()}
    inputs[INPUT][:4] = np.nan  # the served leaf answers NaN class scores on these rows
    expected = {"label": reference["label"].copy(), "probabilities": reference["probabilities"].copy()}
    expected["probabilities"][:4] = np.nan
    release = _with_truth(make_release(tmp_path, iris_repository, onnx_path, inputs, expected), tmp_path / "truth.npz")

    with pytest.raises(CanaryRejected) as caught:  # was: ValueError: Input contains NaN (no report)
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                   find_champion=lambda folder: _native(reference))

    assert 'served outputs hold NaN or infinite values: "probabilities" on 4 of 150 rows' in str(caught.value)
    report = _report(release)
    gates = {g["name"]: g for g in report["gates"]}
    assert gates["nonfinite"]["passed"] is False and report["verdict"] == "rejected"
    assert report["quality"]["candidate"]["rows_with_nonfinite_scores"] == 4
    assert "quality.log_loss" in gates and "flips.negative" in gates

