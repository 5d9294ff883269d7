"""What a shape serves of a model (export/heads.py) and the lengths a variable axis is checked at (export/lengths.py).

Logic only: the output each shape picks or refuses, raw scores told from probabilities, the
reference a raw-score head is judged against, the lengths and batch sizes checked, and the
repository assembled for a raw-score classifier and an embedding model (linted as Triton would).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model_release.errors import ExportError, SpecError
from model_release.export import heads, lengths
from model_release.spec import parse_spec
from model_release.types import ExportResult, IntakeResult, TensorSpec


def _spec(**repository: object):  # noqa: ANN202
    return parse_spec({"name": "t", "model": {"name": "m", "alias": "candidate"}, "repository": repository})


def _intake(outputs: list[TensorSpec], flavor: str = "pytorch", classes: list | None = None,
            inputs: list[TensorSpec] | None = None) -> IntakeResult:
    return IntakeResult(model_name="m", version="1", alias="candidate", run_id=None, source="s", flavor=flavor,
                        model_dir="/nowhere", inputs=inputs or [], outputs=outputs, content_digest="d", classes=classes)


LOGITS = TensorSpec("logits", "FP32", (10,))
EMBED = TensorSpec("embedding", "FP32", (128,))


def test_each_shape_picks_its_output_or_is_refused_before_conversion():
    assert heads.plan(_spec(shape="classifier"), _intake([LOGITS])) == "logits"  # the only vector
    assert heads.plan(_spec(shape="embedding"), _intake([LOGITS, EMBED])) == "embedding"  # by its role's name
    assert heads.plan(_spec(shape="embedding", output="logits"), _intake([LOGITS, EMBED])) == "logits"
    assert heads.plan(_spec(shape="single"), _intake([LOGITS])) is None
    assert heads.plan(_spec(shape="classifier"), _intake([], flavor="sklearn", classes=[0, 1])) == "probabilities"
    with pytest.raises(SpecError) as caught:
        heads.plan(_spec(shape="classifier"), _intake([], flavor="sklearn"))
    assert "needs class scores (one floating vector per row), but model 'm' is a sklearn regressor" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        heads.plan(_spec(shape="classifier"), _intake([TensorSpec("a", "FP32", (3,)), TensorSpec("b", "FP32", (3,))]))
    assert "none is named 'probabilities' and more than one is a floating vector" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        heads.plan(_spec(shape="embedding", output="tokens"), _intake([TensorSpec("tokens", "INT64", (8,))]))
    assert "output 'tokens' of the MLflow signature of model 'm' is INT64 [8], not one floating vector per row" in str(caught.value)


def test_raw_scores_are_told_from_probabilities_and_the_spec_can_say_which():
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(20, 10)).astype(np.float32) * 3
    probabilities = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True)
    assert heads.decide(_spec(shape="classifier"), "logits", raw)["role"] == "logits"
    assert heads.decide(_spec(shape="classifier"), "logits", probabilities)["role"] == "probabilities"
    almost = probabilities.copy()
    almost[0] *= 1.01  # a row summing to 1.01: not probabilities
    assert heads.decide(_spec(shape="classifier"), "logits", almost)["role"] == "logits"
    assert heads.decide(_spec(shape="classifier", scores="logits"), "logits", probabilities)["why"] == "repository.scores: logits"
    assert heads.decide(_spec(shape="embedding"), "embedding", None)["role"] == "embedding"


def test_a_raw_score_head_is_judged_against_the_softmax_and_the_top_class():
    raw = np.array([[1.0, 3.0, 2.0], [0.0, -1.0, 5.0]], dtype=np.float32)
    derived = heads.derived_reference({"output": "logits", "role": "logits"}, {"logits": raw}, None)
    expected = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(derived["probabilities"], expected, rtol=1e-6)
    assert derived["probabilities"].dtype == np.float32 and derived["label"].tolist() == [1, 2]
    named = heads.derived_reference({"output": "logits", "role": "logits"}, {"logits": raw}, ["a", "b", "c"])
    assert named["label"].tolist() == ["b", "c"]
    assert heads.derived_reference({"output": "probabilities", "role": "probabilities"},
                                   {"probabilities": expected, "label": np.array([1, 2])}, None) == {}


def test_the_lengths_checked_come_from_the_tensorrt_range_else_half_and_twice_the_golden_length():
    sample = {"ids": np.zeros((5, 32), np.int64), "mask": np.ones((5, 32), np.int64), "image": np.zeros((5, 3, 8, 8))}
    axes = {"ids": [1], "mask": [1], "image": [2, 3]}
    plain = lengths.variants(_spec(), axes, sample, batch=True)
    by_label = {v.label for v in plain}
    assert "ids[1], mask[1] = 16 (golden 32)" in by_label and "ids[1], mask[1] = 64 (golden 32)" in by_label
    assert "image[2], image[3] = 4 (golden 8)" in by_label and "image[2], image[3] = 16 (golden 8)" in by_label
    assert {v.length for v in plain if v.names == [lengths.BATCH]} == {1, 3}
    ranged = parse_spec({"name": "t", "model": {"name": "m", "alias": "candidate"},
                         "tensorrt": {"shapes": {"ids": {"min": [1], "opt": [32], "max": [128]}}}})
    assert {v.length for v in lengths.variants(ranged, {"ids": [1]}, sample, batch=False)} == {1, 128}
    feeds = lengths.feeds_for(next(v for v in plain if v.length == 64), sample)
    assert feeds["ids"].shape == (5, 64) and feeds["mask"].shape == (5, 64) and feeds["image"].shape == (5, 3, 8, 8)
    np.testing.assert_array_equal(lengths.resized(np.arange(6).reshape(2, 3), 1, 7), [[0, 1, 2, 0, 1, 2, 0], [3, 4, 5, 3, 4, 5, 3]])


def test_a_declared_axis_the_conversion_fixed_is_refused_naming_it():
    spec = parse_spec({"name": "t", "model": {"name": "m", "alias": "candidate"}, "export": {"dynamic_axes": {"ids": [2]}}})
    intake = _intake([], inputs=[TensorSpec("ids", "INT64", (-1, 4))])
    axes = lengths.declared_axes(spec, intake)
    assert axes == {"ids": [1, 2]} and lengths.with_declared_axes(intake, axes).inputs[0].dims == (-1, -1)
    with pytest.raises(ExportError) as caught:
        lengths.check_kept([TensorSpec("ids", "INT64", (-1, 4))], axes, where="the MLflow signature's -1")
    assert str(caught.value).startswith("the converter exported ids[2] fixed at 4, but the model declares that axis variable")
    with pytest.raises(SpecError) as caught:
        lengths.declared_axes(parse_spec({"name": "t", "model": {"name": "m", "alias": "candidate"},
                                          "export": {"dynamic_axes": {"nope": [1]}}}), intake)
    assert "export.dynamic_axes names 'nope', which is not an input of the model; its inputs: ['ids']" in str(caught.value)


def _leaf(tmp_path: Path, outputs: dict[str, int]) -> ExportResult:
    """A one-input ONNX graph (a MatMul per output) and its export result."""
    import onnx
    from onnx import TensorProto, helper

    from model_release.repository.onnx_io import onnx_io
    from model_release.workspace import sha256_file

    nodes, inits, outs = [], [], []
    for name, width in outputs.items():
        inits.append(helper.make_tensor(f"w_{name}", TensorProto.FLOAT, [4, width], np.ones(4 * width).tolist()))
        nodes.append(helper.make_node("MatMul", ["x", f"w_{name}"], [name]))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", width]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])], outs, inits)
    path = tmp_path / "model.onnx"
    tmp_path.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    inputs, outputs_ = onnx_io(path)
    return ExportResult(onnx_path=str(path), onnx_sha256=sha256_file(path), opset=17, inputs=inputs, outputs=outputs_,
                        parity={}, golden_path=str(tmp_path / "golden.npz"), golden_rows=10)


def test_a_raw_score_classifier_and_an_embedding_model_assemble_lint_clean(tmp_path):
    from model_release.repository.assemble import assemble
    from model_release.repository.config import read_config
    from model_release.workspace import Workspace

    export = _leaf(tmp_path, {"logits": 3})
    export.head = {"output": "logits", "role": "logits", "why": "raw scores"}
    result = assemble(_spec(shape="classifier", labels=["a", "b", "c"]), _intake([]), export, Workspace("c-1", tmp_path))
    models = Path(result.repository_dir)
    post = read_config(models / "t_postprocess" / "config.pbtxt")
    assert [t.name for t in post.input] == ["logits"] and [t.name for t in post.output] == ["probabilities", "label"]
    steps = read_config(models / "t" / "config.pbtxt").ensemble_scheduling.step
    assert dict(steps[0].output_map) == {"logits": "logits"} and dict(steps[1].output_map) == {"label": "label", "probabilities": "probabilities"}
    assert "LOGITS = True" in (models / "t_postprocess" / "1" / "model.py").read_text()
    assert result.roles == {"probabilities": "probabilities", "label": "label"}

    export = _leaf(tmp_path / "e", {"embedding": 8, "extra": 2})
    export.head = {"output": "embedding", "role": "embedding", "why": "repository.shape: embedding"}
    result = assemble(_spec(shape="embedding"), _intake([]), export, Workspace("e-1", tmp_path / "e"))
    assert result.roles == {"embedding": "embedding"} and result.models == {"t": 1} and result.labels is None
    # the model file is the exported one, linked: one file on disk
    assert (Path(result.repository_dir) / "t" / "1" / "model.onnx").stat().st_ino == Path(export.onnx_path).stat().st_ino


@pytest.mark.parametrize(("repository", "fragment"), [
    ({"shape": "single", "scores": "logits"}, "repository.scores is 'logits' but repository.shape is 'single'"),
    ({"shape": "fanout", "output": "x", "fanout": {"members": {"a": "release", "b": "b.onnx"}}},
     "repository.output names 'x' but repository.shape 'fanout' serves every output"),
])
def test_a_head_setting_for_a_shape_that_serves_every_output_is_refused(repository, fragment):
    with pytest.raises(SpecError) as caught:
        _spec(**repository)
    assert fragment in str(caught.value)
