"""Deep-learning models at export: variable axes kept and checked, the opset honoured or refused, heads decided first.

Real torch models (tests/e2e/deep_models.py's architectures, trained for an epoch or built
untrained: parity does not care how good a model is) logged with the pytorch flavor to a real
SQLite MLflow, through the intake and export stages; onnxruntime checks the files independently.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from model_release.errors import ExportError, IntakeError, SpecError
from model_release.export.checks import opset_of
from model_release.pipeline import Services, run_export, run_intake
from model_release.workspace import Workspace

from ..e2e import deep_models as dm
from .models import Registry, make_spec

pytestmark = pytest.mark.integration


def _signature(inputs: dict[str, tuple[str, tuple[int, ...]]], outputs: dict[str, tuple[str, tuple[int, ...]]]) -> Any:
    from mlflow.models import ModelSignature
    from mlflow.types.schema import Schema, TensorSpec

    def schema(specs: dict[str, tuple[str, tuple[int, ...]]]) -> Schema:
        return Schema([TensorSpec(np.dtype(dtype), shape, name) for name, (dtype, shape) in specs.items()])

    return ModelSignature(inputs=schema(inputs), outputs=schema(outputs))


TOKENS = {"input_ids": ("int64", (-1, -1)), "attention_mask": ("int64", (-1, -1))}


def _golden(tmp_path: Path, name: str, arrays: dict[str, np.ndarray]) -> str:
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    return str(path)


def _release(registry: Registry, root: Path, model: str, **sections: Any):  # noqa: ANN202
    spec = make_spec(model, base_dir=root, **sections)
    ws = Workspace("r1", root=root)
    intake = run_intake(spec, ws, Services(tracking_uri=registry.uri))
    return spec, ws, run_export(spec, ws, intake)


def _session(path: str) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def tokens() -> dm.Split:
    return dm.token_sequences(rows=700, golden_rows=100)


def test_a_token_encoder_keeps_its_variable_sequence_axis_and_is_checked_at_other_lengths(registry, ws_root, tmp_path, tokens):
    model = dm.train_encoder(tokens, epochs=1, dims=16)
    registry.log("pytorch", model, "encoder-lengths", signature=_signature(TOKENS, {"logits": ("float32", (-1, 3))}),
                 serialization_format="pickle")
    _, ws, result = _release(registry, ws_root, "encoder-lengths",
                             golden={"source": "file", "path": _golden(tmp_path, "tokens", tokens.golden)})

    assert [(s.name, s.dims) for s in result.inputs] == [("input_ids", (-1,)), ("attention_mask", (-1,))]
    checked = {(tuple(r["axes"]), r["length"]) for r in result.lengths}
    sequence = ("input_ids[1]", "attention_mask[1]")
    assert {(sequence, 16), (sequence, 64), (("the batch axis",), 1), (("the batch axis",), 3)} <= checked
    assert all(r["golden_length"] == dm.SEQ_LEN for r in result.lengths if tuple(r["axes"]) == sequence)
    assert json.loads((ws.stage_dir("export") / "parity.json").read_text())["lengths"] == result.lengths
    assert "variable axes also at input_ids[1], attention_mask[1] = 16" in result.headline()
    # the file answers any length, as the model does: checked here without the pipeline's own code
    session = _session(result.onnx_path)
    for length in (5, 100):
        ids = dm.resized_tokens(tokens.golden["input_ids"][:4], length)
        mask = (ids > 0).astype(np.int64)
        expected = dm.predict(model, {"input_ids": ids, "attention_mask": mask})
        np.testing.assert_allclose(session.run(None, {"input_ids": ids, "attention_mask": mask})[0], expected, atol=1e-4)


class FixedLength(torch.nn.Module):
    """Token embeddings flattened into a linear layer sized for 32 tokens: it takes no other length."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(dm.VOCAB, 4)
        self.head = torch.nn.Linear(4 * dm.SEQ_LEN, 3)

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        x = self.tokens(input_ids) * attention_mask.unsqueeze(-1)
        return self.head(x.reshape(x.shape[0], 4 * dm.SEQ_LEN))


def test_a_model_that_fixes_an_axis_its_signature_declares_variable_is_refused_naming_the_axis(registry, ws_root, tmp_path, tokens):
    registry.log("pytorch", FixedLength().eval(), "encoder-fixed", signature=_signature(TOKENS, {"logits": ("float32", (-1, 3))}),
                 serialization_format="pickle")
    with pytest.raises(ExportError) as caught:
        _release(registry, ws_root, "encoder-fixed", golden={"source": "file", "path": _golden(tmp_path, "tokens", tokens.golden)})
    message = str(caught.value)
    assert "fixes attention_mask[1] (fixed at 32), input_ids[1] (fixed at 32), which the model declares variable" in message
    assert "the MLflow signature's -1" in message
    assert not (ws_root / "r1" / "export" / "model.onnx").exists()


class GridSampled(torch.nn.Module):
    """GridSample (ONNX opset 16 and above): no converter reaches opset 15 with it."""

    def forward(self, image: Any) -> Any:
        grid = torch.zeros(image.shape[0], 4, 4, 2)
        return torch.nn.functional.grid_sample(image, grid, align_corners=False).mean(dim=(2, 3))


def test_the_spec_opset_is_honoured_or_refused_naming_it(registry, ws_root, tmp_path) -> None:
    images = dm.digits_images(golden_rows=64)
    signature = _signature({"image": ("float32", (-1, 3, 8, 8))}, {"logits": ("float32", (-1, 10))})
    registry.log("pytorch", dm.DigitsCNN(width=4).eval(), "cnn-opset", signature=signature, serialization_format="pickle")
    golden = {"source": "file", "path": _golden(tmp_path, "images", images.golden)}
    # global average pooling is a ReduceMean, which onnx's converter cannot take below 18: the TorchScript exporter does
    _, _, result = _release(registry, ws_root, "cnn-opset", golden=golden)
    assert result.opset == 17 and opset_of(__import__("onnx").load(result.onnx_path)) == 17
    assert result.converter["note.exporter"].startswith("TorchScript exporter at opset 17")

    registry.log("pytorch", GridSampled().eval(), "grid-opset", signature=_signature(
        {"image": ("float32", (-1, 3, 8, 8))}, {"pooled": ("float32", (-1, 3))}), serialization_format="pickle")
    with pytest.raises(ExportError) as caught:
        _release(registry, ws_root / "refused", "grid-opset", golden=golden, export={"opset": 15})
    message = str(caught.value)
    assert message.startswith("export: export.opset 15 is not honoured: the pytorch model exports at opset 18")
    assert "No Previous Version of GridSample" in message and "grid_sampler" in message
    assert "export.allow_other_opset: true" in message and "\n" not in message

    _, _, shipped = _release(registry, ws_root / "allowed", "grid-opset", golden=golden,
                             export={"opset": 15, "allow_other_opset": True})
    assert shipped.opset == 18 and shipped.opset_requested == 15
    assert shipped.headline().startswith("ONNX opset 18 (export.opset 15 not reached: torch.onnx's torch.export exporter")


def test_a_classifier_answering_raw_scores_is_decided_at_export_and_judged_on_its_softmax(registry, ws_root, tmp_path) -> None:
    images = dm.digits_images(golden_rows=64)
    model = dm.DigitsCNN(width=4).eval()
    signature = _signature({"image": ("float32", (-1, 3, 8, 8))}, {"logits": ("float32", (-1, 10))})
    registry.log("pytorch", model, "cnn-logits", signature=signature, serialization_format="pickle")
    golden = {"source": "file", "path": _golden(tmp_path, "images", images.golden)}
    _, _, result = _release(registry, ws_root, "cnn-logits", golden=golden, repository={"shape": "classifier"},
                            export={"opset": 18})
    assert result.head["output"] == "logits" and result.head["role"] == "logits"
    assert "not probabilities: served through a softmax" in result.head["why"]
    with np.load(result.reference_path) as reference:
        logits = dm.predict(model, {"image": images.golden["image"]})
        scores = np.exp(logits - logits.max(axis=1, keepdims=True))
        np.testing.assert_allclose(reference["probabilities"], scores / scores.sum(axis=1, keepdims=True), atol=1e-6)
        np.testing.assert_array_equal(reference["label"], logits.argmax(axis=1))

    # an embedding shape on a model with two vector outputs and no name: refused before anything is converted
    registry.log("pytorch", dm.DigitsCNN(width=4).eval(), "two-vectors", signature=_signature(
        {"image": ("float32", (-1, 3, 8, 8))}, {"a": ("float32", (-1, 10)), "b": ("float32", (-1, 10))}),
        serialization_format="pickle")
    with pytest.raises(SpecError) as caught:
        _release(registry, ws_root / "two", "two-vectors", golden=golden, repository={"shape": "embedding"})
    assert "repository.shape 'embedding' serves vectors" in str(caught.value) and "a (FP32 [10]), b (FP32 [10])" in str(caught.value)
    assert "Set repository.output" in str(caught.value)
    assert not (ws_root / "two" / "r1" / "export" / "model.onnx").exists()


def test_a_pickled_model_whose_module_is_missing_is_refused_naming_the_module(registry, ws_root, tmp_path) -> None:
    package = tmp_path / "teamnets_src"
    package.mkdir()
    (package / "teamnets.py").write_text(
        "import torch\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n")
    sys.path.insert(0, str(package))
    try:
        import teamnets

        registry.log("pytorch", teamnets.Net().eval(), "team-net", signature=_signature(
            {"x": ("float32", (-1, 4))}, {"y": ("float32", (-1, 2))}), serialization_format="pickle")
    finally:
        sys.path.remove(str(package))
        sys.modules.pop("teamnets", None)
    spec = make_spec("team-net", base_dir=ws_root)
    with pytest.raises(IntakeError) as caught:
        run_intake(spec, Workspace("r1", root=ws_root), Services(tracking_uri=registry.uri))
    message = str(caught.value)
    assert "module 'teamnets', which is not installed where the pipeline runs" in message
    assert "code_paths" in message and "pytorch version" not in message
