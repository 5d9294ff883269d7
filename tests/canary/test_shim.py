"""The canary copy of a repository: ONNX leaves shimmed, BLS and ensembles untouched, TensorRT refused."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from model_release.triton.shim import SHIM_DESCRIPTION, SHIM_SOURCE, prepare_canary_repository, read_config
from model_release.errors import CanaryRejected, GpuUnavailable


def _onnx(batch_only_output: bool = False) -> bytes:
    """A tiny ONNX graph: x FP32 [N, 2] -> y FP32 [N, 2] (or [N] with ``batch_only_output``)."""
    from onnx import TensorProto, helper

    if batch_only_output:
        node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
        axes = [helper.make_tensor("axes", TensorProto.INT64, [1], [1])]
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])
    else:
        node, axes = helper.make_node("Identity", ["x"], ["y"]), []
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])], [y], axes)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _leaf_config(name: str = "leaf", *, y_dims=(2,), y_reshape=None, x_type=mc.TYPE_FP32, **kw) -> mc.ModelConfig:  # noqa: ANN001, ANN003
    config = mc.ModelConfig(name=name, max_batch_size=8, **kw)
    config.input.add(name="x", data_type=x_type, dims=[2])
    y = config.output.add(name="y", data_type=mc.TYPE_FP32, dims=list(y_dims))
    if y_reshape is not None:
        y.reshape.SetInParent()
        y.reshape.shape.extend(y_reshape)
    return config


def _model(repo, name: str, config: mc.ModelConfig, files: dict[str, bytes]) -> None:  # noqa: ANN001
    (repo / name).mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(text_format.MessageToString(config))
    for rel, data in files.items():
        (repo / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / name / rel).write_bytes(data)


def test_an_onnx_leaf_becomes_a_python_shim_and_everything_else_is_copied_unchanged(tmp_path):
    src = tmp_path / "src"
    leaf = _leaf_config(platform="onnxruntime_onnx")
    leaf.instance_group.add(count=2, kind=mc.ModelInstanceGroup.KIND_GPU, gpus=[0])
    leaf.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
    _model(src, "leaf", leaf, {"1/model.onnx": _onnx(), "2/model.onnx": _onnx()})
    post = mc.ModelConfig(name="post", backend="python")
    _model(src, "post", post, {"1/model.py": b"# bls"})
    ens = mc.ModelConfig(name="spine", platform="ensemble")
    _model(src, "spine", ens, {})
    (src / "spine" / "1").mkdir()
    (src / "release.json").write_text("{}")
    before = (src / "post" / "config.pbtxt").read_text()

    copy = prepare_canary_repository(src, tmp_path / "canary")

    assert copy.shimmed == ["leaf"] and copy.unchanged == ["post", "spine"]
    assert copy.description == SHIM_DESCRIPTION
    shim = read_config(copy.path / "leaf" / "config.pbtxt")
    assert (shim.backend, shim.platform) == ("python", "")
    assert [(g.kind, list(g.gpus), g.count) for g in shim.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, [], 2)]
    assert not shim.HasField("optimization")
    for version in ("1", "2"):
        assert (copy.path / "leaf" / version / "model.py").read_text() == SHIM_SOURCE.read_text()
        assert (copy.path / "leaf" / version / "model.onnx").read_bytes() == _onnx()
    assert (copy.path / "post" / "config.pbtxt").read_text() == before
    assert (copy.path / "spine" / "1").is_dir() and (copy.path / "release.json").is_file()
    # the assembled repository itself is never touched
    assert read_config(src / "leaf" / "config.pbtxt").platform == "onnxruntime_onnx"
    assert not (src / "leaf" / "1" / "model.py").exists()


def test_a_custom_onnx_file_name_is_passed_to_the_shim(tmp_path):
    src = tmp_path / "src"
    _model(src, "leaf", _leaf_config(backend="onnxruntime", default_model_filename="net.onnx"), {"3/net.onnx": _onnx()})
    copy = prepare_canary_repository(src, tmp_path / "canary")
    shim = read_config(copy.path / "leaf" / "config.pbtxt")
    assert shim.parameters["shim_model_filename"].string_value == "net.onnx"
    assert shim.default_model_filename == ""  # the python backend would look for net.onnx as its .py


def test_a_tensorrt_plan_cannot_be_shimmed_and_says_what_to_do(tmp_path):
    src = tmp_path / "src"
    _model(src, "plan", mc.ModelConfig(name="plan", platform="tensorrt_plan"), {"1/model.plan": b"x"})
    with pytest.raises(GpuUnavailable) as caught:
        prepare_canary_repository(src, tmp_path / "canary")
    message = str(caught.value)
    assert 'model "plan" is a TensorRT plan' in message and "cannot be shimmed" in message
    assert "endpoint=" in message and "tensorrt.mode: off" in message


def test_an_onnx_leaf_without_its_file_is_rejected(tmp_path):
    src = tmp_path / "src"
    _model(src, "leaf", mc.ModelConfig(name="leaf", backend="onnxruntime"), {"1/README": b""})
    with pytest.raises(CanaryRejected, match='model "leaf" has backend onnxruntime but no version folder holds model.onnx'):
        prepare_canary_repository(src, tmp_path / "canary")


def test_an_unreadable_config_is_rejected_naming_the_file(tmp_path):
    (tmp_path / "src" / "bad").mkdir(parents=True)
    (tmp_path / "src" / "bad" / "config.pbtxt").write_text("name: 'bad'\nno_such_field: 3\n")
    with pytest.raises(CanaryRejected, match=r"bad/config.pbtxt is not a valid Triton model configuration"):
        prepare_canary_repository(tmp_path / "src", tmp_path / "canary")


def test_config_tensors_that_do_not_fit_the_onnx_graph_are_refused_as_the_onnxruntime_backend_would(tmp_path):
    # a batch-only output [N] declared as dims [1] without reshape: the python shim would serve it,
    # a GPU Triton's onnxruntime backend refuses to load it
    src = tmp_path / "src"
    _model(src, "leaf", _leaf_config(backend="onnxruntime", y_dims=(1,), x_type=mc.TYPE_INT64),
           {"1/model.onnx": _onnx(batch_only_output=True)})
    with pytest.raises(CanaryRejected) as caught:
        prepare_canary_repository(src, tmp_path / "canary")
    message = str(caught.value)
    assert 'model "leaf" would not load on Triton\'s onnxruntime backend' in message
    assert "input 'x' is INT64 in config.pbtxt but FP32 in the ONNX graph" in message
    assert "output 'y': the ONNX graph has shape [-1] but the configuration specifies [-1, 1]" in message


def test_a_batch_only_output_with_an_empty_reshape_fits(tmp_path):
    src = tmp_path / "src"
    _model(src, "leaf", _leaf_config(backend="onnxruntime", y_dims=(1,), y_reshape=[]),
           {"1/model.onnx": _onnx(batch_only_output=True)})
    assert prepare_canary_repository(src, tmp_path / "canary").shimmed == ["leaf"]


def test_a_file_that_is_not_onnx_is_rejected_naming_it(tmp_path):
    src = tmp_path / "src"
    _model(src, "leaf", _leaf_config(backend="onnxruntime"), {"1/model.onnx": b"\xff not onnx"})
    with pytest.raises(CanaryRejected, match=r'model "leaf": .*1/model.onnx is not a readable ONNX model'):
        prepare_canary_repository(src, tmp_path / "canary")
