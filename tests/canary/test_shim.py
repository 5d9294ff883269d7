"""The canary copy of a repository: ONNX leaves shimmed, BLS and ensembles untouched, TensorRT refused."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from model_release.canary.shim import SHIM_DESCRIPTION, SHIM_SOURCE, prepare_canary_repository, read_config
from model_release.errors import CanaryRejected, GpuUnavailable


def _model(repo, name: str, config: mc.ModelConfig, files: dict[str, bytes]) -> None:  # noqa: ANN001
    (repo / name).mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(text_format.MessageToString(config))
    for rel, data in files.items():
        (repo / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / name / rel).write_bytes(data)


def test_an_onnx_leaf_becomes_a_python_shim_and_everything_else_is_copied_unchanged(tmp_path):
    src = tmp_path / "src"
    leaf = mc.ModelConfig(name="leaf", platform="onnxruntime_onnx", max_batch_size=8)
    leaf.instance_group.add(count=2, kind=mc.ModelInstanceGroup.KIND_GPU, gpus=[0])
    leaf.optimization.execution_accelerators.gpu_execution_accelerator.add(name="tensorrt")
    _model(src, "leaf", leaf, {"1/model.onnx": b"onnx-1", "2/model.onnx": b"onnx-2"})
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
        assert (copy.path / "leaf" / version / "model.onnx").read_bytes() == f"onnx-{version}".encode()
    assert (copy.path / "post" / "config.pbtxt").read_text() == before
    assert (copy.path / "spine" / "1").is_dir() and (copy.path / "release.json").is_file()
    # the assembled repository itself is never touched
    assert read_config(src / "leaf" / "config.pbtxt").platform == "onnxruntime_onnx"
    assert not (src / "leaf" / "1" / "model.py").exists()


def test_a_custom_onnx_file_name_is_passed_to_the_shim(tmp_path):
    src = tmp_path / "src"
    _model(src, "leaf", mc.ModelConfig(name="leaf", backend="onnxruntime", default_model_filename="net.onnx"),
           {"3/net.onnx": b"x"})
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
