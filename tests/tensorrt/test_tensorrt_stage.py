"""The TensorRT stage: what a missing GPU means for each mode, and a real build where a GPU is lent."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from model_release.errors import GpuUnavailable
from model_release.spec import parse_spec
from model_release.tensorrt import build_plan
from model_release.tensorrt.onnx2trt import _trtexec_command, gpu_environment
from model_release.types import ExportResult, TensorSpec
from model_release.workspace import Workspace

BASE = {"name": "mlp", "model": {"name": "mlp", "version": 1}, "repository": {"shape": "single", "max_batch_size": 8}}


def _mlp_export(tmp_path) -> ExportResult:
    """A two-layer MLP as ONNX (float32, dynamic batch), its golden inputs and onnxruntime outputs."""
    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(4, 16)).astype(np.float32)
    w2 = rng.normal(size=(16, 3)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("w1", TensorProto.FLOAT, w1.shape, w1.ravel()), helper.make_tensor("w2", TensorProto.FLOAT, w2.shape, w2.ravel())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    golden = tmp_path / "golden.npz"
    np.savez(golden, x=rng.normal(size=(32, 4)).astype(np.float32))
    spec_in, spec_out = TensorSpec("x", "FP32", (4,)), TensorSpec("y", "FP32", (3,))
    return ExportResult(str(path), "0" * 64, 17, [spec_in], [spec_out], {}, str(golden), 32)


def test_off_records_that_it_was_not_asked(tmp_path) -> None:
    result = build_plan(parse_spec(BASE), _mlp_export(tmp_path), Workspace("r", tmp_path))
    assert result.built is False and "'off'" in result.reason


def _no_gpu():
    """What gpu_environment reports on a worker without a GPU."""
    return {}, "no NVIDIA GPU is visible (nvidia-smi found none)"


def _gpu_without_tensorrt():
    """What gpu_environment reports on a GPU worker without the tensorrt package."""
    return {"gpu": "NVIDIA L4", "compute_capability": "8.9", "driver": "550.54"}, \
        "the tensorrt Python package is not installed on this worker"


def _never(*args):  # noqa: ANN002
    raise AssertionError("no build may be attempted on a worker that cannot build TensorRT plans")


@pytest.mark.parametrize("environment", [_no_gpu, _gpu_without_tensorrt])
def test_prefer_without_gpu_skips_with_the_reason(tmp_path, environment) -> None:
    env, missing = environment()
    spec = parse_spec({**BASE, "tensorrt": {"mode": "prefer"}})
    result = build_plan(spec, _mlp_export(tmp_path), Workspace("r", tmp_path), environment=environment, build=_never)
    assert result.built is False and result.environment == env
    assert result.reason == f"skipped: {missing} (tensorrt.mode is 'prefer')"


@pytest.mark.parametrize("environment", [_no_gpu, _gpu_without_tensorrt])
def test_require_without_gpu_stops_the_release(tmp_path, environment) -> None:
    _, missing = environment()
    spec = parse_spec({**BASE, "tensorrt": {"mode": "require"}})
    with pytest.raises(GpuUnavailable, match=r"tensorrt.mode is 'require' but this worker cannot build TensorRT plans: ") as err:
        build_plan(spec, _mlp_export(tmp_path), Workspace("r", tmp_path), environment=environment, build=_never)
    assert missing in str(err.value) and "queue 'gpu'" in str(err.value) and "'prefer'" in str(err.value)


def test_the_default_environment_is_this_workers_own() -> None:
    import inspect

    assert inspect.signature(build_plan).parameters["environment"].default is gpu_environment


def test_a_module_named_tensorrt_that_is_not_tensorrt_counts_as_not_installed(monkeypatch) -> None:
    import types

    monkeypatch.setitem(sys.modules, "tensorrt", types.ModuleType("tensorrt"))  # e.g. a tests/tensorrt package on sys.path
    env, missing = gpu_environment()
    assert "tensorrt" not in env
    assert missing in ("no NVIDIA GPU is visible (nvidia-smi found none)",
                       "the tensorrt Python package is not installed on this worker")


def test_reproduce_command_names_the_profile() -> None:
    profile = {"x": ((1, 4), (4, 4), (8, 4))}
    cmd = _trtexec_command("/w/model.onnx", __import__("pathlib").Path("/w/model.plan"), profile, "fp16")
    assert "--minShapes=x:1x4" in cmd and "--optShapes=x:4x4" in cmd and "--maxShapes=x:8x4" in cmd and "--fp16" in cmd


@pytest.mark.gpu
def test_builds_a_plan_that_matches_onnxruntime(tmp_path) -> None:
    spec = parse_spec({**BASE, "tensorrt": {"mode": "require", "precision": "fp32"}})
    ws = Workspace("r", tmp_path)
    result = build_plan(spec, _mlp_export(tmp_path), ws)
    assert result.built and result.plan_path and result.environment["tensorrt"]
    assert result.parity["y"]["passed"] is True
    assert (ws.path / "tensorrt" / "reproduce.sh").read_text().startswith("trtexec")


# --- the stage's decisions, on this machine's CPU: what a GPU worker would do, without a fake engine ---

def _sklearn_export(tmp_path) -> ExportResult:
    """A real scikit-learn export (skl2onnx): a scaled logistic regression, ai.onnx.ml operators inside."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_iris(return_X_y=True)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x.astype(np.float32), y)
    path = tmp_path / "sk.onnx"
    path.write_bytes(to_onnx(model, x[:1].astype(np.float32), options={"zipmap": False}, target_opset=17).SerializeToString())
    spec_in = TensorSpec("X", "FP32", (4,))
    return ExportResult(str(path), "0" * 64, 17, [spec_in], [TensorSpec("probabilities", "FP32", (3,))], {}, "", 0)


def _a_gpu_worker():
    """What gpu_environment reports on a GPU worker with TensorRT (the facts, not an engine)."""
    return {"gpu": "NVIDIA L4", "compute_capability": "8.9", "driver": "550.54", "tensorrt": "10.3.0"}, None


def test_prefer_skips_an_ai_onnx_ml_graph_before_building_naming_its_operators(tmp_path) -> None:
    spec = parse_spec({**BASE, "tensorrt": {"mode": "prefer"}})

    def never(*args):  # noqa: ANN002
        raise AssertionError("no build may be attempted for a graph TensorRT cannot parse")

    result = build_plan(spec, _sklearn_export(tmp_path), Workspace("r", tmp_path), environment=_a_gpu_worker, build=never)
    assert result.built is False
    assert "ai.onnx.ml operators ['LinearClassifier', 'Normalizer', 'Scaler']" in result.reason or (
        "ai.onnx.ml operators" in result.reason and "LinearClassifier" in result.reason and "Scaler" in result.reason)
    assert "skipped before building" in result.reason and "ONNX model is served" in result.reason


def test_require_refuses_an_ai_onnx_ml_graph_saying_why(tmp_path) -> None:
    from model_release.errors import ExportError

    spec = parse_spec({**BASE, "tensorrt": {"mode": "require"}})
    with pytest.raises(ExportError, match=r"'require' but the ONNX graph uses ai.onnx.ml operators \[.*LinearClassifier"):
        build_plan(spec, _sklearn_export(tmp_path), Workspace("r", tmp_path), environment=_a_gpu_worker)


def test_a_parse_failure_under_prefer_falls_back_to_onnx_with_the_reason_in_the_manifest(tmp_path) -> None:
    from model_release.errors import ExportError
    from model_release.repository.manifest import build_manifest

    spec = parse_spec({**BASE, "tensorrt": {"mode": "prefer"}})

    def parser_refuses(spec, export, ws, env):  # noqa: ANN001 - what build_engine raises when the parser says no
        raise ExportError(f"TensorRT could not parse {export.onnx_path}: In node 2 (importMatMul): UNSUPPORTED_NODE")

    export = _mlp_export(tmp_path)
    result = build_plan(spec, export, Workspace("r", tmp_path), environment=_a_gpu_worker, build=parser_refuses)
    assert result.built is False and result.reason.startswith("fell back to ONNX: TensorRT could not parse")
    assert result.environment["compute_capability"] == "8.9"
    from model_release.types import IntakeResult

    intake = IntakeResult("mlp", "1", None, None, "s", "onnx", str(tmp_path), export.inputs, export.outputs, "0" * 64)
    (tmp_path / "rel").mkdir()
    manifest = build_manifest(release_id="r", spec=spec, intake=intake, export=export, tensorrt=result, entry_model="mlp",
                              load_order=["mlp"], models={"mlp": 1}, release_dir=tmp_path / "rel")
    assert manifest["tensorrt"]["reason"].startswith("fell back to ONNX: TensorRT could not parse")
    with pytest.raises(ExportError, match="could not parse"):
        build_plan(parse_spec({**BASE, "tensorrt": {"mode": "require"}}), export, Workspace("r", tmp_path),
                   environment=_a_gpu_worker, build=parser_refuses)


def test_dynamic_non_batch_dims_take_their_range_from_the_spec(tmp_path) -> None:
    from model_release.errors import SpecError
    from model_release.tensorrt.decide import profile_shapes

    tokens = [TensorSpec("ids", "INT64", (-1,)), TensorSpec("mask", "INT64", (-1,)), TensorSpec("lang", "INT64", (1,))]
    without = parse_spec({**BASE, "tensorrt": {"mode": "prefer"}})
    with pytest.raises(SpecError, match=r"input 'ids' has dynamic non-batch dimension\(s\) \[0\].*tensorrt.shapes.ids"):
        profile_shapes(tokens, 8, without)
    spec = parse_spec({**BASE, "tensorrt": {"mode": "prefer", "shapes": {
        "ids": {"min": [1], "opt": [128], "max": [512]}, "mask": {"min": [1], "opt": [128], "max": [512]}}}})
    assert profile_shapes(tokens, 8, spec) == {
        "ids": ((1, 1), (4, 128), (8, 512)), "mask": ((1, 1), (4, 128), (8, 512)), "lang": ((1, 1), (4, 1), (8, 1))}
    bad = parse_spec({**BASE, "tensorrt": {"mode": "prefer", "shapes": {"lang": {"min": [2], "opt": [2], "max": [2]}}}})
    with pytest.raises(SpecError, match=r"dimension 0 of 'lang' is fixed at 1"):
        profile_shapes(tokens[2:], 8, bad)
    with pytest.raises(SpecError, match="tensorrt.shapes.*1 <= min <= opt <= max"):
        parse_spec({**BASE, "tensorrt": {"shapes": {"ids": {"min": [4], "opt": [2], "max": [8]}}}})
