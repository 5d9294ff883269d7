"""The TensorRT stage: what a missing GPU means for each mode, and a real build where a GPU is lent."""

from __future__ import annotations

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


def test_prefer_without_gpu_skips_with_the_reason(tmp_path) -> None:
    env, missing = gpu_environment()
    if not missing:
        pytest.skip("this machine has a GPU with TensorRT; the CPU path is not exercised here")
    spec = parse_spec({**BASE, "tensorrt": {"mode": "prefer"}})
    result = build_plan(spec, _mlp_export(tmp_path), Workspace("r", tmp_path))
    assert result.built is False
    assert missing in result.reason and "prefer" in result.reason


def test_require_without_gpu_stops_the_release(tmp_path) -> None:
    _, missing = gpu_environment()
    if not missing:
        pytest.skip("this machine has a GPU with TensorRT; the CPU path is not exercised here")
    spec = parse_spec({**BASE, "tensorrt": {"mode": "require"}})
    with pytest.raises(GpuUnavailable) as err:
        build_plan(spec, _mlp_export(tmp_path), Workspace("r", tmp_path))
    assert "queue 'gpu'" in str(err.value) and "prefer" in str(err.value)


def test_reproduce_command_names_the_profile() -> None:
    cmd = _trtexec_command("/w/model.onnx", __import__("pathlib").Path("/w/model.plan"), {"x": (4,)}, 8, "fp16")
    assert "--minShapes=x:1x4" in cmd and "--optShapes=x:4x4" in cmd and "--maxShapes=x:8x4" in cmd and "--fp16" in cmd


@pytest.mark.gpu
def test_builds_a_plan_that_matches_onnxruntime(tmp_path) -> None:
    spec = parse_spec({**BASE, "tensorrt": {"mode": "require", "precision": "fp32"}})
    ws = Workspace("r", tmp_path)
    result = build_plan(spec, _mlp_export(tmp_path), ws)
    assert result.built and result.plan_path and result.environment["tensorrt"]
    assert result.parity["y"]["passed"] is True
    assert (ws.path / "tensorrt" / "reproduce.sh").read_text().startswith("trtexec")
