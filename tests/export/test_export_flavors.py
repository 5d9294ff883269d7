"""Every supported flavor, trained here, logged to a real MLflow, through intake and export with parity.

Each test checks the exported files against the model object it trained (not against the
pipeline's own native adapter), and runs onnxruntime on the ONNX file independently.
"""

from __future__ import annotations

import importlib
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from model_release.pipeline import Services, run_export, run_intake
from model_release.types import ExportResult
from model_release.workspace import Workspace, sha256_file

from .models import Registry, make_spec, sklearn_columns_pipeline, sklearn_regressor, torch_cnn, torch_mlp

pytestmark = pytest.mark.integration


def release(registry: Registry, root: Path, model_name: str, release_id: str = "r1", **sections: Any):
    spec = make_spec(model_name, base_dir=root, **sections)
    ws = Workspace(release_id, root=root)
    intake = run_intake(spec, ws, Services(tracking_uri=registry.uri))
    return spec, intake, ws, run_export(spec, ws, intake)


def run_onnx(result: ExportResult, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(result.onnx_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in result.outputs]
    return dict(zip(names, sess.run(names, inputs)))


def load_npz(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def check_files(ws: Workspace, result: ExportResult) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The stage's files agree with the result; returns the golden inputs and the reference outputs."""
    out = ws.stage_dir("export")
    assert Path(result.onnx_path) == out / "model.onnx"
    assert sha256_file(result.onnx_path) == result.onnx_sha256
    assert ws.load_result("export", ExportResult) == result
    assert (out / "reproduce.sh").read_text().startswith("#!/bin/sh")
    assert json.loads((out / "parity.json").read_text())["passed"] is True
    assert not (out / "failing_rows.npz").exists()
    golden, reference = load_npz(result.golden_path), load_npz(result.reference_path)
    assert sorted(golden) == sorted(s.name for s in result.inputs)
    assert sorted(reference) == sorted(s.name for s in result.outputs)
    assert all(len(v) == result.golden_rows for v in (*golden.values(), *reference.values()))
    assert all(o["passed"] for o in result.parity.values())
    return golden, reference


def test_sklearn_classifier_pipeline_exports_label_and_probabilities(registry, breast_cancer, ws_root):
    name, model, x = breast_cancer
    spec, intake, ws, result = release(registry, ws_root, name, export={"tolerances": {"probabilities": {"atol": 1e-6, "rtol": 1e-5}}})

    assert intake.classes == [0, 1]
    assert [(s.name, s.datatype, s.dims) for s in result.inputs] == [("input", "FP32", (30,))]
    assert [(s.name, s.datatype, s.dims) for s in result.outputs] == [("label", "INT64", ()), ("probabilities", "FP32", (2,))]
    golden, reference = check_files(ws, result)
    assert result.golden_rows == 100  # the logged input example
    np.testing.assert_array_equal(reference["label"], model.predict(golden["input"].astype(np.float64)))
    np.testing.assert_allclose(reference["probabilities"], model.predict_proba(golden["input"].astype(np.float64)), rtol=0, atol=0)
    onnx_out = run_onnx(result, golden)
    np.testing.assert_array_equal(onnx_out["label"], reference["label"])
    np.testing.assert_allclose(onnx_out["probabilities"], reference["probabilities"], atol=1e-6)
    assert result.parity["label"]["agreement"] == 1.0
    assert result.parity["probabilities"]["max_abs"] == pytest.approx(np.abs(onnx_out["probabilities"] - reference["probabilities"]).max())
    assert result.cached is False and result.opset == 17


def test_sklearn_regressor_exports_variable(registry, ws_root):
    model, x = sklearn_regressor()
    registry.log("sklearn", model, "diabetes-regressor", input_example=x[:64])
    _, _, ws, result = release(registry, ws_root, "diabetes-regressor")

    assert [(s.name, s.datatype, s.dims) for s in result.outputs] == [("variable", "FP32", (1,))]
    golden, reference = check_files(ws, result)
    np.testing.assert_array_equal(reference["variable"][:, 0], model.predict(golden["input"].astype(np.float64)))
    assert np.abs(run_onnx(result, golden)["variable"] - reference["variable"]).max() < 1e-3


def test_sklearn_dataframe_pipeline_gets_one_input_per_column_with_triton_names(registry, ws_root):
    model, frame = sklearn_columns_pipeline()
    registry.log("sklearn", model, "columns-classifier", input_example=frame.iloc[:80],
                 skops_trusted_types=["sklearn.tree._tree.Tree"])
    _, intake, ws, result = release(registry, ws_root, "columns-classifier")

    assert intake.name_map == {"petal length (cm)": "petal_length_cm", "2nd width": "t_2nd_width"}
    assert [(s.name, s.datatype, s.dims) for s in result.inputs] == [
        ("petal_length_cm", "FP32", (1,)), ("t_2nd_width", "FP32", (1,)), ("colour", "BYTES", (1,)),
    ]
    golden, reference = check_files(ws, result)
    import pandas as pd

    again = pd.DataFrame({
        "petal length (cm)": golden["petal_length_cm"][:, 0].astype(np.float64),
        "2nd width": golden["t_2nd_width"][:, 0].astype(np.float64),
        "colour": golden["colour"][:, 0],
    })
    np.testing.assert_array_equal(reference["label"], model.predict(again))
    onnx_out = run_onnx(result, {**golden, "colour": golden["colour"].astype(object)})
    np.testing.assert_array_equal(onnx_out["label"], reference["label"])


def test_torch_mlp_exports_with_a_dynamic_batch_axis(registry, ws_root):
    import onnx
    import torch

    model, x = torch_mlp()
    registry.log("pytorch", model, "torch-mlp", input_example=x)  # saved as pt2 (torch.export)
    _, intake, ws, result = release(registry, ws_root, "torch-mlp", export={"simplify": True})

    assert [(s.name, s.datatype, s.dims) for s in result.outputs] == [("output", "FP32", (3,))]
    golden, reference = check_files(ws, result)
    with torch.no_grad():
        np.testing.assert_allclose(reference["output"], model(torch.from_numpy(golden["input"])).numpy(), atol=1e-6)
    dim0 = onnx.load(result.onnx_path).graph.input[0].type.tensor_type.shape.dim[0]
    assert dim0.dim_param and not dim0.HasField("dim_value")
    seven = np.random.default_rng(3).normal(size=(7, 8)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(run_onnx(result, {"input": seven})["output"], model(torch.from_numpy(seven)).numpy(), atol=1e-5)
    assert result.converter["note.simplify"].startswith("onnxslim applied")


def test_torch_cnn_from_a_golden_file_streamed_in_batches(registry, ws_root, tmp_path):
    import torch

    model, x = torch_cnn()
    registry.log("pytorch", model, "torch-cnn", input_example=x[:4], serialization_format="pickle")
    golden_file = tmp_path / "golden.npz"
    many = np.random.default_rng(4).normal(size=(300, 1, 8, 8)).astype(np.float32)
    np.savez(golden_file, input=many)
    _, _, ws, result = release(registry, ws_root, "torch-cnn",
                               golden={"source": "file", "path": str(golden_file), "rows": 250, "batch_rows": 64})

    golden, reference = check_files(ws, result)
    assert result.golden_rows == 250
    np.testing.assert_array_equal(golden["input"], many[:250])
    with torch.no_grad():
        np.testing.assert_allclose(reference["output"], model(torch.from_numpy(many[:250])).numpy(), atol=1e-6)


def test_torch_model_with_two_inputs_and_two_outputs_keeps_signature_names(registry, ws_root, tmp_path):
    import torch
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema
    from mlflow.types.schema import TensorSpec as Spec

    from .models import torch_two_in_two_out

    model = torch_two_in_two_out()
    f32 = np.dtype("float32")
    signature = ModelSignature(
        inputs=Schema([Spec(f32, (-1, 4), "features"), Spec(f32, (-1, 2), "extra:0")]),
        outputs=Schema([Spec(f32, (-1, 3), "scores"), Spec(f32, (-1, 4), "embedding")]),
    )
    registry.log("pytorch", model, "two-heads", signature=signature, serialization_format="pickle")
    rng = np.random.default_rng(5)
    features, extra = rng.normal(size=(40, 4)).astype(np.float32), rng.normal(size=(40, 2)).astype(np.float32)
    np.savez(tmp_path / "two.npz", **{"features": features, "extra:0": extra})
    _, intake, ws, result = release(registry, ws_root, "two-heads", golden={"source": "file", "path": str(tmp_path / "two.npz")})

    assert intake.name_map == {"extra:0": "extra_0"}
    assert [(s.name, s.dims) for s in result.inputs] == [("features", (4,)), ("extra_0", (2,))]
    assert [(s.name, s.dims) for s in result.outputs] == [("scores", (3,)), ("embedding", (4,))]
    golden, reference = check_files(ws, result)
    with torch.no_grad():
        scores, embedding = model(torch.from_numpy(features), torch.from_numpy(extra))
    np.testing.assert_allclose(reference["scores"], scores.numpy(), atol=1e-6)
    np.testing.assert_allclose(reference["embedding"], embedding.numpy(), atol=1e-6)
    onnx_out = run_onnx(result, golden)
    np.testing.assert_allclose(onnx_out["scores"], reference["scores"], atol=1e-5)


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
def test_gradient_boosting_classifiers_through_onnxmltools(registry, ws_root, library):
    importlib.import_module("onnxmltools")  # the converter export uses: locked, so a missing one fails here
    lib = importlib.import_module(library)
    from .models import iris

    x, y = iris()
    model = (lib.XGBClassifier(n_estimators=8, max_depth=3) if library == "xgboost"
             else lib.LGBMClassifier(n_estimators=8, verbose=-1)).fit(x, y)
    registry.log(library, model, f"{library}-iris", input_example=x)
    _, intake, ws, result = release(registry, ws_root, f"{library}-iris")

    assert intake.flavor == library and intake.classes == [0, 1, 2]
    golden, reference = check_files(ws, result)
    np.testing.assert_allclose(reference["probabilities"], model.predict_proba(golden["input"].astype(np.float64)), atol=1e-12)
    assert result.parity["label"]["agreement"] == 1.0


def test_onnx_flavor_as_logged_with_simplification(registry, breast_cancer, ws_root):
    from skl2onnx import to_onnx

    _, model, x = breast_cancer
    onx = to_onnx(model, x[:1].astype(np.float32), options={"zipmap": False}, target_opset=17)
    from mlflow.models import infer_signature

    x32 = x[:50].astype(np.float32)
    registry.log("onnx", onx, "bc-onnx", input_example=x32, signature=infer_signature(x32))
    _, intake, ws, result = release(registry, ws_root, "bc-onnx", export={"simplify": True})

    assert intake.flavor == "onnx"
    assert [s.name for s in result.inputs] == [s.name for s in intake.inputs]
    golden, reference = check_files(ws, result)
    np.testing.assert_array_equal(reference["label"], model.predict(golden[result.inputs[0].name].astype(np.float64)))
    assert "onnxslim" in result.converter["note.simplify"]
    # the figures are those of the file that ships (the simplified one), so a re-release reuses them
    slim = run_onnx(result, golden)
    assert result.parity["probabilities"]["max_abs"] == pytest.approx(np.abs(slim["probabilities"] - reference["probabilities"]).max())
    _, _, ws2, again = release(registry, ws_root, "bc-onnx", "r2", export={"simplify": True})
    assert again.cached and again.converter["parity"].startswith("reused from cache ")
    assert again.onnx_sha256 == result.onnx_sha256 and again.parity == result.parity
    check_files(ws2, again)


def test_second_release_of_an_unchanged_model_reuses_the_cached_onnx(registry, breast_cancer, ws_root):
    name = breast_cancer[0]
    _, first_intake, _, first = release(registry, ws_root, name, "first")
    _, second_intake, ws2, second = release(registry, ws_root, name, "second")

    assert first_intake.content_digest == second_intake.content_digest
    assert (first.cached, second.cached) == (False, True)
    assert second.onnx_sha256 == first.onnx_sha256
    assert second.converter["cache_key"] == first.converter["cache_key"]
    assert (ws_root / ".cache" / "export" / first.converter["cache_key"] / "model.onnx").is_file()
    assert second.parity == first.parity and second.parity["probabilities"]["total_rows"] == 100
    assert second.converter["parity"].startswith("reused from cache ")  # see test_parity_cache.py
    check_files(ws2, second)

    _, _, _, other_opset = release(registry, ws_root, name, "third", export={"opset": 15})
    assert other_opset.cached is False and other_opset.converter["cache_key"] != first.converter["cache_key"]

    # a damaged cache entry is not reused
    entry = ws_root / ".cache" / "export" / first.converter["cache_key"] / "model.onnx"
    entry.write_bytes(entry.read_bytes() + b"\0")
    _, _, _, after_damage = release(registry, ws_root, name, "fourth")
    assert after_damage.cached is False and sha256_file(entry) == after_damage.onnx_sha256

    # reproduce.sh re-runs the export from the workspace, converting again
    proc = subprocess.run(["sh", str(ws2.stage_dir("export") / "reproduce.sh"), "--no-cache"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["cached"] is False
    redone = ws2.load_result("export", ExportResult)
    assert redone.cached is False and all(o["passed"] for o in redone.parity.values())
