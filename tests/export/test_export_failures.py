"""Releases the export stage must block, each with a message naming what failed and what to do.

Drift, NaN and label flips are injected through the ``converters`` seam: a converter that wraps the
real skl2onnx conversion and rewrites one output with a few real ONNX nodes on the rows whose first
feature exceeds a threshold, so the test knows exactly which rows must be reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from model_release.errors import ExportError, ParityError, SpecError
from model_release.export import export
from model_release.export.base import converter_for
from model_release.intake.stage import resolve
from model_release.pipeline import run_stage
from model_release.workspace import Workspace

from .altering import THRESHOLD, AlteringConverter
from .models import Registry, make_spec

pytestmark = pytest.mark.integration

def run_release(registry: Registry, root: Path, model_name: str, converters: Any = None, **sections: Any):
    spec = make_spec(model_name, base_dir=root, **{"export": {"cache": False}, **sections})
    ws = Workspace("blocked", root=root)
    intake = resolve(spec, ws, tracking_uri=registry.uri)
    return ws, lambda: run_stage(ws, "export", export, spec, intake, ws, converters=converters)


def hit_rows(x: np.ndarray) -> np.ndarray:
    return np.flatnonzero(x[:100, 0].astype(np.float32) > THRESHOLD)


def test_drifting_output_is_blocked_naming_output_figures_and_where_the_rows_are(registry, breast_cancer, ws_root):
    name, _, x = breast_cancer
    rows = hit_rows(x)
    assert 0 < len(rows) < 100
    ws, run = run_release(registry, ws_root, name, {"sklearn": AlteringConverter("probabilities", "drift")},
                          export={"cache": False, "tolerances": {"probabilities": {"atol": 0.001, "rtol": 0.001}}})
    with pytest.raises(ParityError) as err:
        run()
    msg = str(err.value)
    out = ws.stage_dir("export")
    assert msg.startswith(f'export: output "probabilities" differs from the sklearn model on {len(rows)} of 100 rows')
    assert "max abs 0.02 > atol 0.001" in msg
    assert "Loosen export.tolerances.probabilities.atol" in msg and f"{out}/" in msg
    assert (out / "model.onnx").is_file() and not ws.result_path("export").exists()
    with np.load(out / "failing_rows.npz") as failing:
        np.testing.assert_array_equal(failing["row"], rows)
        np.testing.assert_allclose(failing["onnx.probabilities"] - failing["native.probabilities"], 0.02, atol=1e-6)
    parity = json.loads((out / "parity.json").read_text())
    assert parity["passed"] is False and parity["outputs"]["label"]["passed"] is True
    assert parity["outputs"]["probabilities"]["failing_rows"] == len(rows)
    assert parity["outputs"]["probabilities"]["worst_rows"][0] in set(rows.tolist())


def test_nan_output_fails_whatever_the_tolerance(registry, breast_cancer, ws_root):
    name, _, x = breast_cancer
    ws, run = run_release(registry, ws_root, name, {"sklearn": AlteringConverter("probabilities", "nan")},
                          export={"cache": False, "tolerances": {"probabilities": {"atol": 1e9, "rtol": 1e9}}})
    with pytest.raises(ParityError) as err:
        run()
    n = len(hit_rows(x))
    assert f'output "probabilities" differs from the sklearn model on {n} of 100 rows' in str(err.value)
    assert f"{2 * n} NaN/Inf elements where the sklearn model is finite" in str(err.value)
    assert "NaN/Inf cannot be tolerated away" in str(err.value)


def test_flipped_labels_are_blocked_by_agreement(registry, breast_cancer, ws_root):
    name, _, x = breast_cancer
    n = len(hit_rows(x))
    _, run = run_release(registry, ws_root, name, {"sklearn": AlteringConverter("label", "flip")})
    with pytest.raises(ParityError) as err:
        run()
    assert f'output "label" agrees with the sklearn model on {(100 - n) / 100:.4%} of 100 rows ({n} differ; required agreement 100.0000%)' in str(err.value)


def test_float64_model_losing_precision_in_float32_is_blocked_under_a_tight_tolerance(registry, ws_root):
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    x = 1e4 + rng.normal(size=(200, 6))
    y = x @ np.array([3.0, -2.0, 1.5, 0.5, -1.0, 2.0]) + 7.0
    registry.log("sklearn", LinearRegression().fit(x, y), "big-offsets", input_example=x[:50])
    _, run = run_release(registry, ws_root, "big-offsets",
                         export={"cache": False, "tolerances": {"default": {"atol": 1e-6, "rtol": 1e-9}}})
    with pytest.raises(ParityError, match=r'output "variable" differs from the sklearn model on \d+ of 50 rows .*> atol 1e-06'):
        run()


def test_a_model_the_converter_cannot_handle_is_an_export_error(registry, ws_root):
    from sklearn.datasets import load_iris
    from sklearn.semi_supervised import LabelSpreading

    x, y = load_iris(return_X_y=True)
    registry.log("sklearn", LabelSpreading().fit(x, y), "label-spreading", input_example=x[:20])
    _, run = run_release(registry, ws_root, "label-spreading")
    with pytest.raises(ExportError) as err:
        run()
    assert "skl2onnx 1.20.0 could not convert the sklearn model LabelSpreading" in str(err.value)
    assert "MissingShapeCalculator" in str(err.value)


@pytest.mark.parametrize(("array", "expected"), [
    (np.zeros((10, 29)), 'column "input" has dims [29] per row, expected FP64 with dims [30]'),
    (np.full((10, 30), "a"), 'column "input" has dtype <U1 (string), expected FP64 with dims [30]'),
])
def test_golden_file_that_disagrees_with_the_signature_is_refused(registry, breast_cancer, ws_root, tmp_path, array, expected):
    np.savez(tmp_path / "golden.npz", input=array)
    ws, run = run_release(registry, ws_root, breast_cancer[0], golden={"source": "file", "path": str(tmp_path / "golden.npz")})
    with pytest.raises(SpecError) as err:
        run()
    assert expected in str(err.value) and str(tmp_path / "golden.npz") in str(err.value)
    assert not ws.result_path("export").exists()


def test_a_flavor_without_converter_lists_the_supported_ones():
    with pytest.raises(ExportError, match="flavor 'h2o' has no ONNX converter; supported: sklearn, pytorch, onnx, xgboost, lightgbm"):
        converter_for("h2o")


def test_a_tolerance_naming_no_output_is_refused_with_the_outputs_there_are(registry, breast_cancer, ws_root):
    """A misspelled output name would fall back to the default tolerance silently: it is an error."""
    name, _, _ = breast_cancer
    ws, run = run_release(registry, ws_root, name, export={"cache": False, "tolerances": {"probabilites": {"atol": 0.5}}})
    with pytest.raises(SpecError) as err:
        run()
    msg = str(err.value)
    assert msg.startswith("export: export.tolerances.probabilites in the release spec 'rel' names no output of the model")
    assert "its outputs: 'label', 'probabilities'" in msg and "did you mean 'probabilities'?" in msg
    assert not ws.result_path("export").exists()
    ws, run = run_release(registry, ws_root / "trt", name, tensorrt={"tolerances": {"scores": {"atol": 0.5}}})
    with pytest.raises(SpecError, match="tensorrt.tolerances.scores in the release spec 'rel' names no output"):
        run()
