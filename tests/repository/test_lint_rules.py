"""One test per lint rule, each on the valid example repository broken in exactly that way."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

from model_release.repository.config import read_config, write_config
from model_release.repository.lint import RULES, lint_repository

from .lint_repos import write_valid_repository


def edit(root: Path, model: str, change: Callable) -> None:
    path = root / model / "config.pbtxt"
    config = read_config(path)
    change(config)
    write_config(path, config)


def edit_source(root: Path, model: str, old: str, new: str) -> None:
    path = root / model / "1" / "model.py"
    text = path.read_text()
    assert old in text, f"the mutation must change {model}'s model.py"
    path.write_text(text.replace(old, new))


def _stub_execute(root: Path, model: str) -> None:
    """Make execute a placeholder: ``pass`` for its whole body (as Triton's QA models write it)."""
    path = root / model / "1" / "model.py"
    head, found, _ = path.read_text().partition("    def execute(self, requests):\n")
    assert found, f"the mutation must change {model}'s model.py"
    path.write_text(head + found + "        pass\n")


def _step(config, model: str):
    return next(s for s in config.ensemble_scheduling.step if s.model_name == model)


def _replace_config(root: Path, model: str, make: Callable[[Path], object]) -> None:
    path = root / model / "config.pbtxt"
    path.unlink()
    make(path)


def _socket_at(path: Path) -> None:
    """A unix socket where a file should be: open(2) fails on it (ENXIO), even for root."""
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)


def _decoupled_mix(root: Path) -> None:
    """preprocess is decoupled; postprocess reads both its result (through the classifier) and RAW directly."""
    edit(root, "preprocess", lambda c: setattr(c.model_transaction_policy, "decoupled", True))
    edit(root, "postprocess", lambda c: c.input.add(name="RAW", data_type=11, dims=[4]))
    edit(root, "pipeline", lambda c: _step(c, "postprocess").input_map.update({"RAW": "RAW"}))


def _overwrite_input(root: Path) -> None:
    def change(c):
        _step(c, "preprocess").output_map.update({"FEATURES": "RAW"})
        _step(c, "classifier_onnx").input_map.update({"float_input": "RAW"})
    edit(root, "pipeline", change)


def auto_complete(root: Path, model: str, *lines: str) -> None:
    """Give ``model``'s TritonPythonModel an auto_complete_config(config) running ``lines``, then returning config."""
    body = "".join(f"        {line}\n" for line in lines)
    edit_source(root, model, "class TritonPythonModel:\n",
                f"class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(config):\n{body}"
                "        return config\n\n")


def _unread_dims(root: Path) -> None:
    """add_sub's config loses INPUT0's dims; its auto_complete_config adds INPUT0 with dims computed at run time."""
    edit(root, "add_sub", lambda c: c.input[0].ClearField("dims"))
    auto_complete(root, "add_sub", "size = len(config.as_dict()['output'])",
                  'config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [size]})')


# rule -> (the model it must name, the mutation)
CASES: dict[str, tuple[str, Callable[[Path], object]]] = {
    "repo-not-found": ("", lambda r: shutil.rmtree(r)),
    "config-missing": ("add_sub", lambda r: ((r / "add_sub/config.pbtxt").unlink(), (r / "add_sub/1/model.py").rename(r / "add_sub/1/main.py"))),
    "config-autocomplete": ("add_sub", lambda r: (r / "add_sub/config.pbtxt").unlink()),
    "config-parse": ("add_sub", lambda r: (r / "add_sub/config.pbtxt").write_text('name: "add_sub"\ninput [ { name: "x" ')),
    "name-mismatch": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c, "name", "add_and_sub"))),
    "platform-missing": ("classifier_onnx", lambda r: (edit(r, "classifier_onnx", lambda c: c.ClearField("backend")), (r / "classifier_onnx/1/model.onnx").rename(r / "classifier_onnx/1/graph.bin"))),
    "platform-inferred": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: c.ClearField("backend"))),
    "platform-unknown": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: (c.ClearField("backend"), setattr(c, "platform", "onnx_runtime")))),
    "platform-backend-pair": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: setattr(c, "platform", "tensorrt_plan"))),
    "platform-conflict": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c, "platform", "onnxruntime_onnx"))),
    "ensemble-backend": ("pipeline", lambda r: edit(r, "pipeline", lambda c: setattr(c, "backend", "python"))),
    "python-parameter-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.parameters["FORCE_CPU_ONLY_INPUT_TENSORS"], "string_value", "maybe"))),
    "config-not-a-file": ("add_sub", lambda r: _replace_config(r, "add_sub", Path.mkdir)),
    "file-symlink": ("add_sub", lambda r: _replace_config(r, "add_sub", lambda p: p.symlink_to(r.parent / "elsewhere.pbtxt"))),
    "file-too-large": ("add_sub", lambda r: _replace_config(r, "add_sub", lambda p: _sparse(p, (1 << 20) + 1))),
    "file-unreadable": ("add_sub", lambda r: _replace_config(r, "add_sub", _socket_at)),
    "backend-unknown": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: setattr(c, "backend", "my_custom_backend"))),
    "scheduling-not-ensemble": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.ensemble_scheduling.step.add(model_name="preprocess"))),
    "model-file-missing": ("classifier_onnx", lambda r: (r / "classifier_onnx/1/model.onnx").rename(r / "classifier_onnx/1/model.bin")),
    "version-none": ("add_sub", lambda r: shutil.rmtree(r / "add_sub/1")),
    "version-empty": ("add_sub", lambda r: (r / "add_sub/1/model.py").unlink()),
    "version-not-numeric": ("add_sub", lambda r: (r / "add_sub/v2").mkdir()),
    "version-leading-zero": ("add_sub", lambda r: shutil.copytree(r / "add_sub/1", r / "add_sub/02")),
    "version-policy-missing": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.version_policy.specific.versions.extend([1, 2]))),
    "version-misread": ("add_sub", lambda r: (r / "add_sub/1").rename(r / "add_sub/1abc")),
    "version-policy-latest-zero": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.version_policy.latest.SetInParent())),
    "version-policy-none": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.version_policy.specific.versions.extend([2]))),
    "version-stray": ("add_sub", lambda r: shutil.copytree(r / "add_sub/1", r / "add_sub/3")),
    "batch-size-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c, "max_batch_size", -1))),
    "preferred-batch-size": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: c.dynamic_batching.preferred_batch_size.append(16))),
    "priority-level-invalid": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: setattr(c.dynamic_batching, "priority_levels", 2))),
    "preserve-ordering-conflict": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: (setattr(c.dynamic_batching, "priority_levels", 2), setattr(c.dynamic_batching, "default_priority_level", 1), setattr(c.dynamic_batching, "preserve_ordering", True)))),
    "response-cache-conflict": ("add_sub", lambda r: edit(r, "add_sub", lambda c: (setattr(c.model_transaction_policy, "decoupled", True), setattr(c.response_cache, "enable", True)))),
    "sequence-batching-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.sequence_batching.control_input.add(name="CORRID", control=[dict(kind=3, data_type=11)]))),
    "instance-gpus-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.instance_group[0].gpus.append(0))),
    "instance-kind-gpu": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.instance_group[0], "kind", 1))),
    "tensorrt-only-field": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.input[0], "is_shape_tensor", True))),
    "tensor-name-empty": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.output[1], "name", ""))),
    "reshape-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.input[0].reshape.shape.append(0))),
    "tensor-format-dims": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.input[0], "format", 2))),
    "label-file-missing": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.output[0], "label_filename", "labels.txt"))),
    "batch-io-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.batch_input.add(kind=0, target_name=["X"], data_type=8, source_input=["NOPE"]))),
    "leaf-no-warmup": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: c.ClearField("model_warmup"))),
    "instance-count-invalid": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: setattr(c.instance_group[0], "count", -2))),
    "tensor-duplicate": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.input.add(name="INPUT0", data_type=11, dims=[4]))),
    "datatype-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.input[1], "data_type", 0))),
    "dims-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: c.input[0].dims.__setitem__(0, 0))),
    "reshape-mismatch": ("classifier_onnx", lambda r: edit(r, "classifier_onnx", lambda c: c.output[0].reshape.shape.append(2))),
    "ensemble-instance-group": ("pipeline", lambda r: edit(r, "pipeline", lambda c: c.instance_group.add(count=1))),
    "ensemble-own-settings": ("pipeline", lambda r: edit(r, "pipeline", lambda c: c.model_warmup.add(name="w", batch_size=1))),
    "ensemble-step-incomplete": ("pipeline", lambda r: edit(r, "pipeline", lambda c: _step(c, "postprocess").ClearField("output_map"))),
    "ensemble-member-invalid": ("pipeline", lambda r: edit_source(r, "postprocess", "NAMES = np.array", "NAMES = npx.array")),
    "ensemble-input-overwritten": ("pipeline", _overwrite_input),
    "ensemble-decoupled-mix": ("pipeline", _decoupled_mix),
    "ensemble-cycle": ("pipeline", lambda r: edit(r, "pipeline", lambda c: setattr(_step(c, "postprocess"), "model_name", "pipeline"))),
    "ensemble-no-steps": ("pipeline", lambda r: edit(r, "pipeline", lambda c: c.ensemble_scheduling.ClearField("step"))),
    "ensemble-step-missing": ("pipeline", lambda r: edit(r, "pipeline", lambda c: setattr(_step(c, "postprocess"), "model_name", "postprocessor"))),
    "ensemble-version-missing": ("pipeline", lambda r: edit(r, "pipeline", lambda c: setattr(_step(c, "classifier_onnx"), "model_version", 7))),
    "ensemble-batch-size": ("pipeline", lambda r: edit(r, "pipeline", lambda c: setattr(c, "max_batch_size", 64))),
    "ensemble-map-unknown": ("pipeline", lambda r: edit(r, "pipeline", lambda c: (_step(c, "postprocess").input_map.pop("probabilities"), _step(c, "postprocess").input_map.update({"probs": "probabilities"})))),
    "ensemble-input-unmapped": ("pipeline", lambda r: edit(r, "postprocess", lambda c: c.input.add(name="mask", data_type=11, dims=[3]))),
    "ensemble-tensor-double": ("pipeline", lambda r: edit(r, "pipeline", lambda c: _step(c, "postprocess").output_map.update({"label": "probabilities"}))),
    "ensemble-tensor-unproduced": ("pipeline", lambda r: edit(r, "pipeline", lambda c: _step(c, "classifier_onnx").input_map.update({"float_input": "featurs"}))),
    "ensemble-input-unused": ("pipeline", lambda r: edit(r, "pipeline", lambda c: c.input.add(name="EXTRA", data_type=11, dims=[4]))),
    "ensemble-tensor-unused": ("pipeline", lambda r: edit(r, "pipeline", lambda c: _step(c, "classifier_onnx").output_map.update({"label": "class_index"}))),
    "ensemble-dtype-mismatch": ("pipeline", lambda r: edit(r, "postprocess", lambda c: setattr(c.input[0], "data_type", 12))),
    "ensemble-shape-mismatch": ("pipeline", lambda r: edit(r, "postprocess", lambda c: c.input[0].dims.__setitem__(0, 5))),
    "bls-cycle": ("bls_async", lambda r: (edit_source(r, "bls_sync", '"add_sub"', '"bls_async"'), edit_source(r, "bls_async", '"add_sub"', '"bls_sync"'))),
    "python-syntax": ("add_sub", lambda r: edit_source(r, "add_sub", "def execute(self, requests):", "def execute(self, requests:")),
    "python-no-model-class": ("preprocess", lambda r: edit_source(r, "preprocess", "class TritonPythonModel:", "class Preprocess:")),
    "python-no-execute": ("preprocess", lambda r: edit_source(r, "preprocess", "def execute(", "def run(")),
    "python-await-in-sync": ("bls_async", lambda r: edit_source(r, "bls_async", "async def execute", "def execute")),
    "python-undefined-at-load": ("postprocess", lambda r: edit_source(r, "postprocess", "NAMES = np.array", "NAMES = npx.array")),
    "python-undefined-name": ("postprocess", lambda r: edit_source(r, "postprocess", "NAMES[probabilities", "LABEL_NAMES[probabilities")),
    "python-no-responses": ("preprocess", lambda r: edit_source(r, "preprocess", "        return responses\n", "")),
    "python-execute-stub": ("preprocess", lambda r: _stub_execute(r, "preprocess")),
    "decoupled-returns": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.model_transaction_policy, "decoupled", True))),
    "bls-target-missing": ("bls_async", lambda r: edit_source(r, "bls_async", 'model_name="add_sub"', 'model_name="add_subtract"')),
    "bls-target-dynamic": ("bls_sync", lambda r: edit_source(r, "bls_sync", "model_name=TARGET", 'model_name=pb_utils.get_input_tensor_by_name(request, "MODEL").as_numpy()[0].decode()')),
    "bls-output-unknown": ("bls_sync", lambda r: edit_source(r, "bls_sync", '["OUTPUT0", "OUTPUT1"]', '["OUTPUT0", "OUTPUT2"]')),
    "bls-self-call": ("bls_sync", lambda r: edit_source(r, "bls_sync", 'TARGET = "add_sub"', 'TARGET = "bls_sync"')),
    "autocomplete-invalid": ("add_sub", lambda r: auto_complete(r, "add_sub", 'config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32"})')),
    "autocomplete-conflict": ("add_sub", lambda r: auto_complete(r, "add_sub", 'config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [8]})')),
    "autocomplete-unread": ("add_sub", _unread_dims),
    "autocomplete-ignored": ("add_sub", lambda r: auto_complete(r, "add_sub", "config.set_model_transaction_policy(dict(decoupled=True))",
                                                                'config.add_input({"name": "INPUT2", "data_type": "FP32", "dims": [4]})')),
    "python-filename": ("add_sub", lambda r: (edit(r, "add_sub", lambda c: setattr(c, "default_model_filename", "model.python")),
                                              (r / "add_sub/1/model.py").rename(r / "add_sub/1/model.python"))),
    "bls-blocking-depth": ("bls_sync", lambda r: edit(r, "bls_sync", lambda c: setattr(c.instance_group[0], "count", 1))),
    "metrics-unreadable": ("add_sub", lambda r: edit(r, "add_sub", lambda c: _metric_control(c, FIRST_RESPONSE, [1, 10]))),
    "metrics-control-invalid": ("add_sub", lambda r: edit(r, "add_sub", lambda c: _metric_control(c, FIRST_RESPONSE, []))),
    "metrics-family-unknown": ("add_sub", lambda r: edit(r, "add_sub", lambda c: _metric_control(c, "nv_inference_request_duration_us", [1]))),
    "runtime-escapes": ("add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c, "runtime", "../libtriton_python.so"))),
}

FIRST_RESPONSE = "nv_inference_first_response_histogram_ms"


def _metric_control(config, family: str | None, buckets: list[float] | None):  # noqa: ANN001 - ModelConfig
    """Add one model_metrics.metric_control: no identifier when ``family`` is None, no histogram_options when ``buckets`` is None."""
    control = config.model_metrics.metric_control.add()
    if family is not None:
        control.metric_identifier.family = family
    if buckets is not None:
        control.histogram_options.SetInParent()
        control.histogram_options.buckets.extend(buckets)
    return control


@pytest.fixture
def valid_repo(tmp_path: Path) -> Path:
    return write_valid_repository(tmp_path / "models")


def test_every_rule_has_a_case_and_there_are_at_least_25():
    assert set(CASES) == set(RULES)
    assert len(RULES) >= 25


def test_the_example_repository_is_clean_and_ordered(valid_repo):
    report = lint_repository(valid_repo)
    assert report.findings == [], [str(f) for f in report.findings]
    order = report.load_order
    assert sorted(order) == sorted(["add_sub", "bls_sync", "bls_async", "preprocess", "classifier_onnx", "postprocess", "pipeline"])
    for dependency, user in [("add_sub", "bls_sync"), ("add_sub", "bls_async"), ("preprocess", "pipeline"),
                             ("classifier_onnx", "pipeline"), ("postprocess", "pipeline")]:
        assert order.index(dependency) < order.index(user)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule(rule, valid_repo):
    model, mutate = CASES[rule]
    assert not [f for f in lint_repository(valid_repo).findings if f.rule == rule]
    mutate(valid_repo)
    report = lint_repository(valid_repo)
    hits = [f for f in report.findings if f.rule == rule]
    assert hits, f"{rule} not reported; found: {[str(f) for f in report.findings]}"
    assert any(f.model == model for f in hits), [str(f) for f in hits]
    severity = RULES[rule][0]
    assert all(f.severity == severity for f in hits)
    assert report.ok == (severity == "warning" and not report.errors)
    for finding in hits:
        assert finding.file and (model == "" or finding.file.startswith(f"{model}/")), finding
        assert len(finding.message) > 30, finding


def test_a_version_folder_starting_with_0_is_not_a_version(valid_repo):
    (valid_repo / "add_sub" / "1").rename(valid_repo / "add_sub" / "01")
    found = {(f.rule, f.severity) for f in lint_repository(valid_repo).findings if f.model == "add_sub"}
    assert found == {("version-leading-zero", "warning"), ("version-none", "error")}


@pytest.mark.parametrize(("family", "buckets", "triton_says"), [
    (None, [1.0], "metric control must specify 'metric_identifier'"),
    ("", [1.0], "metric identifier must specify non-empty 'family'"),
    (FIRST_RESPONSE, None, "metric control must specify 'histogram_options'"),
    (FIRST_RESPONSE, [], "histogram options must specify non-empty 'buckets'"),
])
def test_each_metric_control_triton_refuses_is_named_in_its_words(valid_repo, family, buckets, triton_says):
    edit(valid_repo, "add_sub", lambda c: (_metric_control(c, FIRST_RESPONSE, [5.0]), _metric_control(c, family, buckets)))
    found = {f.rule: f for f in lint_repository(valid_repo).findings if f.model == "add_sub"}
    assert "metrics-unreadable" in found  # the pinned Triton refuses any model_metrics
    invalid = found["metrics-control-invalid"]
    assert invalid.message.startswith("model_metrics.metric_control[1]: Triton 24.11 and newer refuse it")  # the second one
    assert f'("{triton_says}")' in invalid.message


def test_a_valid_metric_control_is_only_the_pinned_tritons_refusal(valid_repo):
    edit(valid_repo, "add_sub", lambda c: _metric_control(c, FIRST_RESPONSE, [0.5]))  # one bucket: just enough
    rules = sorted(f.rule for f in lint_repository(valid_repo).findings if f.model == "add_sub")
    assert rules == ["metrics-unreadable"]


@pytest.mark.parametrize(("runtime", "refused"), [
    ("libtriton_python.so", False), ("sub/libtriton_python.so", False), ("./libtriton_python.so", False),
    ("sub/../libtriton_python.so", False),
    ("../libtriton_python.so", True), ("sub/../../libtriton_python.so", True), ("/opt/libtriton_python.so", True),
])
def test_runtime_is_refused_only_when_its_path_leaves_the_folder(valid_repo, runtime, refused):
    edit(valid_repo, "add_sub", lambda c: setattr(c, "runtime", runtime))
    hits = [f for f in lint_repository(valid_repo).findings if f.rule == "runtime-escapes"]
    assert bool(hits) is refused
    if refused:
        assert f"runtime {runtime!r} leaves the folder" in hits[0].message and "escapes backend directory" in hits[0].message
