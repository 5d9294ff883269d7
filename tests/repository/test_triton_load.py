"""The generated classifier, cascade and fanout repositories load and answer on the local Triton."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from model_release.repository.assemble import assemble
from model_release.workspace import Workspace

from .support import INPUT, export_result, intake_result, iris, make_spec

pytestmark = pytest.mark.integration


def _load(triton, result) -> None:
    triton.install(Path(result.repository_dir))
    for name in result.load_order:
        try:
            triton.client.load_model(name)
        except Exception as exc:  # the server log says why; show it
            raise AssertionError(f"loading {name} failed: {exc}\n{triton.log_tail()}") from None
        assert triton.client.is_model_ready(name), triton.log_tail()


def _infer(triton, model: str, x: np.ndarray, outputs: list[str]) -> dict[str, np.ndarray]:
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput(INPUT, list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    wanted = [httpclient.InferRequestedOutput(name) for name in outputs]
    response = triton.client.infer(model, [tensor], outputs=wanted)
    return {name: response.as_numpy(name) for name in outputs}


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["probabilities"], {INPUT: x})[0]


def test_classifier_answers_labels_and_probabilities(triton, onnx_models, tmp_path):
    spec = make_spec("clf", shape="classifier", labels=["setosa", "versicolor", "virginica"], top_k=2, preprocess=True)
    result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("clf-1", tmp_path))
    _load(triton, result)
    x, _ = iris()
    rows = x[::5]
    out = _infer(triton, result.entry_model, rows, ["probabilities", "label"])
    expected = _ort(onnx_models["lr"], rows)
    np.testing.assert_allclose(out["probabilities"], expected, rtol=1e-6, atol=1e-7)
    names = np.array(["setosa", "versicolor", "virginica"])
    best = np.argsort(-expected, axis=1, kind="stable")[:, :2]
    assert out["label"].shape == (len(rows), 2)
    assert [[v.decode() for v in row] for row in out["label"]] == names[best].tolist()


def test_cascade_sends_only_unsure_rows_to_the_large_model(triton, onnx_models, tmp_path):
    spec = make_spec(
        "cas", base_dir=onnx_models["tree"].parent, shape="cascade",
        cascade={"small": str(onnx_models["weak"]), "large": "release", "threshold": 0.6},
    )
    result = assemble(spec, intake_result(), export_result(onnx_models["tree"]), Workspace("cas-1", tmp_path))
    assert result.load_order == ["cas_large", "cas_small", "cas"]
    _load(triton, result)
    x = iris()[0][::3]
    small = _ort(onnx_models["weak"], x)
    large = _ort(onnx_models["tree"], x)
    sure = small.max(axis=1) >= 0.6
    assert 0 < sure.sum() < len(x), "the test needs easy and hard rows"
    out = _infer(triton, "cas", x, ["probabilities", "answered_by"])
    answered = np.array([v.decode() for v in out["answered_by"].reshape(-1)])
    assert (answered == np.where(sure, "cas_small", "cas_large")).all()
    np.testing.assert_allclose(out["probabilities"][sure], small[sure], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out["probabilities"][~sure], large[~sure], rtol=1e-6, atol=1e-7)
    # an all-easy batch never reaches the large model
    easy = _infer(triton, "cas", x[sure][:4], ["answered_by"])
    assert {v.decode() for v in easy["answered_by"].reshape(-1)} == {"cas_small"}


def test_fanout_combines_every_member(triton, onnx_models, tmp_path):
    spec = make_spec(
        "fan", base_dir=onnx_models["tree"].parent, shape="fanout",
        fanout={"members": {"lr": "release", "tree": "tree.onnx", "weak": "weak.onnx"}, "combine": "mean"},
    )
    result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("fan-1", tmp_path))
    _load(triton, result)
    x, _ = iris()
    out = _infer(triton, "fan", x[:20], ["probabilities"])
    expected = np.mean([_ort(onnx_models[k], x[:20]) for k in ("lr", "tree", "weak")], axis=0)
    np.testing.assert_allclose(out["probabilities"], expected, rtol=1e-5, atol=1e-6)
