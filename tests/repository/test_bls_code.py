"""The generated BLS code's logic on CPU (numpy) and on its device path (torch through DLPack).

The python backend is replaced by :mod:`fake_pb_utils` (torch tensors stand for GPU tensors: on the
GPU where one is visible, else torch's CPU tensors), so this runs without a server or a GPU; the load
tests run the same code on the real local Triton. Only a GPU run catches a step that mixes host and
device tensors (torch's CPU tensors mix freely): on an H200, a router that built its tensors without
``device=array.device`` failed here ("Expected all tensors to be on the same device") and passed on CPU.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from model_release.repository.assemble import assemble
from model_release.workspace import Workspace

from . import fake_pb_utils as pb
from .support import INPUT, export_result, intake_result, make_spec


def _load(path: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb)
    spec = importlib.util.spec_from_file_location(f"generated_{path.parent.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TritonPythonModel()


def _run(model, *requests):
    pb.CALLS.clear()
    return asyncio.run(model.execute(list(requests)))


def _value(response, name):
    tensor = pb.get_output_tensor_by_name(response, name)
    return pb.host(tensor.data)


@pytest.fixture
def cascade(onnx_models, tmp_path, monkeypatch):
    spec = make_spec("cas", base_dir=tmp_path, shape="cascade",
                     cascade={"small": "release", "large": str(onnx_models["tree"]), "threshold": 0.8})
    result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("cas", tmp_path / "ws"))
    return _load(Path(result.repository_dir) / "cas" / "1" / "model.py", monkeypatch)


def _small(feeds):  # sure of class 0 when x0 >= 0.8, of class 1 when x0 <= 0.2, unsure between
    import torch

    x0 = feeds[INPUT][:, 0]
    as_lib = torch if isinstance(x0, torch.Tensor) else np
    probs = as_lib.stack([x0, 1 - x0, 0 * x0], 1)
    return {"probabilities": probs}


def _large(feeds):
    rows = feeds[INPUT].shape[0]
    return {"probabilities": np.tile(np.array([[0.0, 0.0, 1.0]], np.float32), (rows, 1))}


X = np.array([[0.9, 0, 0, 0], [0.5, 0, 0, 0], [0.1, 0, 0, 0], [0.6, 0, 0, 0]], np.float32)


@pytest.mark.parametrize(
    ("inputs_on_device", "small_on_device", "large_on_device"),
    [(False, False, False), (True, True, True), (False, True, False), (True, False, True)],
)
def test_cascade_routes_unsure_rows_on_any_device(cascade, inputs_on_device, small_on_device, large_on_device):
    device = lambda f, on: (lambda feeds: {k: pb.on_device(v) for k, v in f(feeds).items()}) if on else f  # noqa: E731
    pb.MODELS.clear()
    pb.MODELS.update({"cas_small": device(_small, small_on_device), "cas_large": device(_large, large_on_device)})
    x = pb.on_device(X) if inputs_on_device else X
    (response,) = _run(cascade, pb.Request(**{INPUT: x}))
    assert not response.has_error(), response.error().message()
    assert [name for name, _ in pb.CALLS] == ["cas_small", "cas_large"]
    large_rows = pb.CALLS[1][1][INPUT]
    np.testing.assert_array_equal(pb.host(large_rows), X[[1, 3]])  # only the unsure rows
    answered = [v.decode() for v in _value(response, "answered_by").reshape(-1)]
    assert answered == ["cas_small", "cas_large", "cas_small", "cas_large"]
    np.testing.assert_allclose(
        _value(response, "probabilities"),
        [[0.9, 0.1, 0], [0, 0, 1], [0.1, 0.9, 0], [0, 0, 1]], atol=1e-6)
    if small_on_device:  # the result stayed a device tensor, on the small model's device: no host copy on the way out
        out = pb.get_output_tensor_by_name(response, "probabilities")
        assert not out.is_cpu() and out.data.device.type == pb.device()


def test_cascade_never_calls_the_large_model_when_all_rows_are_sure(cascade):
    pb.MODELS.clear()
    pb.MODELS.update({"cas_small": _small, "cas_large": _large})
    (response,) = _run(cascade, pb.Request(**{INPUT: X[[0, 2]]}))
    assert [name for name, _ in pb.CALLS] == ["cas_small"]
    assert {v.decode() for v in _value(response, "answered_by").reshape(-1)} == {"cas_small"}


def test_cascade_reports_a_member_error_in_the_response(cascade):
    pb.MODELS.clear()  # neither member is "loaded"
    (response,) = _run(cascade, pb.Request(**{INPUT: X}))
    assert response.has_error() and "cas_small" in response.error().message()


@pytest.mark.parametrize("combine", ["mean", "max", "min"])
def test_fanout_combines_numpy_and_device_outputs(onnx_models, tmp_path, monkeypatch, combine):
    spec = make_spec("fan", base_dir=tmp_path, shape="fanout",
                     fanout={"members": {"a": "release", "b": str(onnx_models["tree"])}, "combine": combine})
    result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("fan", tmp_path / "ws"))
    model = _load(Path(result.repository_dir) / "fan" / "1" / "model.py", monkeypatch)
    a = np.array([[0.2, 0.3, 0.5]], np.float32)
    b = np.array([[0.6, 0.1, 0.3]], np.float32)
    expected = getattr(np, combine)(np.stack([a, b]), axis=0)
    for b_on_device in (False, True):
        pb.MODELS.clear()
        pb.MODELS.update({"fan_a": lambda feeds: {"probabilities": a},
                          "fan_b": lambda feeds: {"probabilities": pb.on_device(b) if b_on_device else b}})
        (response,) = _run(model, pb.Request(**{INPUT: X[:1]}))
        assert sorted(name for name, _ in pb.CALLS) == ["fan_a", "fan_b"]
        np.testing.assert_allclose(_value(response, "probabilities"), expected, atol=1e-7)
