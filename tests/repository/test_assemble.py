"""The assemble stage: naming contract, configs, versions, errors, and the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_release.errors import AssembleError, SpecError
from model_release.repository.assemble import assemble
from model_release.repository.config import read_config, wire_name
from model_release.repository.lint import lint_repository
from model_release.repository.manifest import finalize_manifest, hash_tree
from model_release.types import TensorRTResult
from model_release.workspace import Workspace, sha256_file

from .support import export_result, intake_result, make_spec


def _tensors(tensors) -> list[tuple[str, str, list[int]]]:
    return [(t.name, wire_name(t.data_type), list(t.dims)) for t in tensors]


def test_classifier_follows_the_naming_contract(onnx_models, tmp_path):
    spec = make_spec("iris", shape="classifier", labels=["setosa", "versicolor", "virginica"], top_k=2,
                     model_version=3, max_batch_size=32, instances=2)
    result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("iris-1", tmp_path))
    repo = Path(result.repository_dir)
    assert result.entry_model == "iris"
    assert result.models == {"iris_model": 3, "iris_postprocess": 3, "iris": 3}
    assert result.load_order[-1] == "iris" and set(result.load_order) == set(result.models)
    assert result.warnings == []
    assert sorted(p.name for p in repo.iterdir()) == ["iris", "iris_model", "iris_postprocess"]
    for name in result.models:
        assert [p.name for p in (repo / name).iterdir() if p.is_dir()] == ["3"]
        assert list(read_config(repo / name / "config.pbtxt").version_policy.specific.versions) == [3]

    ensemble = read_config(repo / "iris" / "config.pbtxt")
    assert ensemble.platform == "ensemble" and ensemble.max_batch_size == 32
    assert _tensors(ensemble.input) == [("float_input", "FP32", [4])]
    assert _tensors(ensemble.output) == [("probabilities", "FP32", [3]), ("label", "BYTES", [2])]
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == ["iris_model", "iris_postprocess"]

    leaf = read_config(repo / "iris_model" / "config.pbtxt")
    assert leaf.backend == "onnxruntime" and leaf.instance_group[0].count == 2
    assert sha256_file(repo / "iris_model" / "3" / "model.onnx") == sha256_file(onnx_models["lr"])
    labels = json.loads((repo / "iris_postprocess" / "3" / "labels.json").read_text())
    assert labels == {"labels": ["setosa", "versicolor", "virginica"]}


def test_classifier_labels_default_to_the_model_classes(onnx_models, tmp_path):
    result = assemble(make_spec(shape="classifier"), intake_result([4, 7, 9]), export_result(onnx_models["lr"]),
                      Workspace("iris-2", tmp_path))
    labels = json.loads((Path(result.repository_dir) / "iris_postprocess" / "1" / "labels.json").read_text())
    assert labels["labels"] == ["4", "7", "9"]
    assert result.models == {"iris_model": 1, "iris_postprocess": 1, "iris": 1}


def test_single_is_the_model_with_its_outputs_unchanged(onnx_models, tmp_path):
    result = assemble(make_spec(shape="single", max_batch_size=0), intake_result(None),
                      export_result(onnx_models["regressor"]), Workspace("iris-3", tmp_path))
    assert result.models == {"iris": 1} and result.load_order == ["iris"]
    config = read_config(Path(result.repository_dir) / "iris" / "config.pbtxt")
    assert config.max_batch_size == 0
    assert _tensors(config.input) == [("float_input", "FP32", [-1, 4])]
    assert _tensors(config.output) == [("variable", "FP32", [-1, 1])]


def test_a_built_tensorrt_plan_becomes_the_leaf(onnx_models, tmp_path):
    plan = tmp_path / "model.plan"
    plan.write_bytes(b"not really a plan")
    trt = TensorRTResult(built=True, plan_path=str(plan), plan_sha256=sha256_file(plan), precision="fp16")
    result = assemble(make_spec(shape="classifier"), intake_result(), export_result(onnx_models["lr"]),
                      Workspace("iris-4", tmp_path / "ws"), tensorrt=trt)
    leaf_dir = Path(result.repository_dir) / "iris_model"
    config = read_config(leaf_dir / "config.pbtxt")
    assert config.platform == "tensorrt_plan" and not config.backend
    assert sorted(p.name for p in (leaf_dir / "1").iterdir()) == ["model.plan"]
    manifest = json.loads(Path(result.manifest_path).read_text())
    assert manifest["tensorrt"]["plan_sha256"] == trt.plan_sha256


def test_a_tensorrt_result_that_was_not_built_keeps_onnx(onnx_models, tmp_path):
    trt = TensorRTResult(built=False, reason="no GPU")
    result = assemble(make_spec(shape="single"), intake_result(), export_result(onnx_models["lr"]),
                      Workspace("iris-5", tmp_path), tensorrt=trt)
    assert (Path(result.repository_dir) / "iris" / "1" / "model.onnx").is_file()


@pytest.mark.parametrize(
    ("repository", "model", "classes", "message"),
    [
        ({"shape": "classifier", "labels": ["a", "b"]}, "lr", [0, 1, 2], "give exactly 3 labels"),
        ({"shape": "classifier", "labels": ["a", "a", "b"]}, "lr", [0, 1, 2], "distinct"),
        ({"shape": "classifier"}, "regressor", None, "use repository.shape: single"),
        ({"shape": "classifier", "top_k": 4}, "lr", [0, 1, 2], "top_k 4 exceeds the 3 classes"),
        ({"shape": "single", "max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [8]}}, "lr", None,
         "preferred_batch_size [8] exceed"),
        ({"shape": "cascade", "cascade": {"small": "release", "large": "regressor.onnx", "threshold": 0.9}}, "lr", None,
         "use repository.shape: single"),
    ],
)
def test_spec_and_model_disagreements_are_assemble_errors(onnx_models, tmp_path, repository, model, classes, message):
    spec = make_spec(base_dir=onnx_models["lr"].parent, **repository)
    with pytest.raises(AssembleError, match=message.replace("[", r"\[").replace("]", r"\]")):
        assemble(spec, intake_result(classes), export_result(onnx_models[model]), Workspace("iris-6", tmp_path))


@pytest.mark.parametrize(
    ("repository", "field"),
    [
        ({"shape": "cascade"}, "repository.cascade is missing"),
        ({"shape": "cascade", "cascade": {"large": "x.onnx", "threshold": 1.5}}, "repository.cascade.threshold"),
        ({"shape": "cascade", "cascade": {"large": "x.onnx", "threshold": 0.5, "treshold": 1}}, "repository.cascade.treshold"),
        ({"shape": "cascade", "cascade": {"small": "a.onnx", "large": "b.onnx", "threshold": 0.5}}, "must be 'release'"),
        ({"shape": "fanout", "fanout": {"members": {"../evil": "release", "b": "b.onnx"}}}, "repository.fanout.members"),
        ({"shape": "fanout", "fanout": {"members": {"a": "release"}}}, "repository.fanout.members"),
        ({"shape": "fanout", "fanout": {"members": {"a": "release", "b": "b.txt"}}}, "repository.fanout.members"),
    ],
)
def test_cascade_and_fanout_blocks_are_validated(onnx_models, tmp_path, repository, field):
    with pytest.raises(SpecError, match=field.replace(".", r"\.").replace("[", r"\[")):
        assemble(make_spec(**repository), intake_result(), export_result(onnx_models["lr"]), Workspace("iris-7", tmp_path))


def test_fanout_members_must_take_the_same_inputs(onnx_models, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    other = tmp_path / "other.onnx"
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["probabilities"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), other)
    spec = make_spec(base_dir=tmp_path, shape="fanout", fanout={"members": {"lr": "release", "other": "other.onnx"}})
    with pytest.raises(AssembleError, match="every member must take the same inputs"):
        assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("iris-8", tmp_path / "ws"))


def test_manifest_names_every_file_with_its_digest(onnx_models, tmp_path):
    ws = Workspace("iris-9", tmp_path)
    result = assemble(make_spec(shape="classifier", preprocess=True), intake_result(), export_result(onnx_models["lr"]), ws)
    release_dir = Path(result.manifest_path).parent
    manifest = json.loads(Path(result.manifest_path).read_text())
    assert manifest["format_version"] == 1 and manifest["release_id"] == "iris-9" and manifest["canary"] is None
    assert manifest["model"]["run_id"] == "abc123" and manifest["model"]["metrics"] == {"accuracy": 0.97}
    assert manifest["spec"]["repository"]["preprocess"] is True
    assert manifest["export"]["onnx_sha256"] == sha256_file(onnx_models["lr"])
    assert manifest["repository"] == {
        "entry_model": "iris", "load_order": result.load_order, "models": result.models,
        # how to read the entry model's outputs, for the canary of a later release judging this one as champion
        "roles": {"label": "label", "probabilities": "probabilities"}, "labels": ["0", "1", "2"], "classes": [0, 1, 2],
        "calls": {"iris": ["iris_model", "iris_postprocess", "iris_preprocess"], "iris_model": [], "iris_postprocess": [],
                  "iris_preprocess": []},
    }
    assert (result.roles, result.labels, result.classes) == (manifest["repository"]["roles"], ["0", "1", "2"], [0, 1, 2])
    on_disk = sorted(p.relative_to(release_dir).as_posix() for p in release_dir.rglob("*") if p.is_file())
    assert sorted(manifest["files"]) == [p for p in on_disk if p != "release.json"]
    assert "models/iris_model/1/model.onnx" in manifest["files"]
    for rel, entry in manifest["files"].items():
        assert entry == {"sha256": sha256_file(release_dir / rel), "size": (release_dir / rel).stat().st_size}


def test_finalize_adds_the_canary_and_rehashes(onnx_models, tmp_path):
    result = assemble(make_spec(shape="single"), intake_result(), export_result(onnx_models["lr"]), Workspace("iris-10", tmp_path))
    release_dir = Path(result.manifest_path).parent
    (release_dir / "canary").mkdir()
    (release_dir / "canary" / "report.json").write_text('{"passed": true}')
    manifest = finalize_manifest(result.manifest_path, release_dir, {"passed": True, "summary": "ok"})
    assert manifest["canary"] == {"passed": True, "summary": "ok"}
    assert "canary/report.json" in manifest["files"] and "release.json" not in manifest["files"]
    assert json.loads(Path(result.manifest_path).read_text()) == manifest


def test_hash_tree_is_sorted_and_relative(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_bytes(b"z")
    (tmp_path / "a.txt").write_bytes(b"")
    tree = hash_tree(tmp_path)
    assert list(tree) == ["a.txt", "b/z.txt"]
    assert tree["a.txt"] == {"sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "size": 0}


def test_a_rerun_replaces_the_whole_repository(onnx_models, tmp_path):
    ws = Workspace("iris-11", tmp_path)
    assemble(make_spec(shape="classifier"), intake_result(), export_result(onnx_models["lr"]), ws)
    result = assemble(make_spec(shape="single"), intake_result(), export_result(onnx_models["lr"]), ws)
    assert sorted(p.name for p in Path(result.repository_dir).iterdir()) == ["iris"]
    assert lint_repository(result.repository_dir).findings == []


@pytest.mark.parametrize(("instances", "expected"), [(1, 2), (3, 3)])
def test_bls_instances_exceed_the_call_depth(onnx_models, tmp_path, instances, expected):
    spec = make_spec(base_dir=tmp_path, shape="cascade", instances=instances,
                     cascade={"large": str(onnx_models["tree"]), "threshold": 0.5})
    result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("cas-2", tmp_path / "ws"))
    repo = Path(result.repository_dir)
    router = read_config(repo / "iris" / "config.pbtxt")
    assert router.backend == "python" and router.instance_group[0].count == expected
    assert router.parameters["FORCE_CPU_ONLY_INPUT_TENSORS"].string_value == "no"
    assert read_config(repo / "iris_small" / "config.pbtxt").instance_group[0].count == instances
    code = (repo / "iris" / "1" / "model.py").read_text()
    assert "async def execute" in code and ".async_exec()" in code and "to_dlpack" in code


def test_a_lint_error_in_the_output_stops_the_stage(onnx_models, tmp_path, monkeypatch):
    import shutil

    from model_release.errors import LintError
    from model_release.repository.render import template_root

    templates = tmp_path / "templates"
    shutil.copytree(template_root(), templates)
    post = templates / "classifier" / "postprocess.py.j2"
    post.write_text(post.read_text().replace("def execute(self, requests):", "def run(self, requests):"))
    monkeypatch.setenv("MODEL_RELEASE_TEMPLATES", str(templates))
    with pytest.raises(LintError) as caught:
        assemble(make_spec(shape="classifier"), intake_result(), export_result(onnx_models["lr"]), Workspace("iris-12", tmp_path))
    assert "[python-no-execute] model 'iris_postprocess'" in str(caught.value)
    assert not (tmp_path / "iris-12" / "repository" / "release.json").exists()
