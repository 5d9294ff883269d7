"""The agreement corpus: the example repository (:mod:`.lint_repos`) changed in one way, and the model to load.

Each case is judged twice: by the real tritonserver 2.51 (does the model load?) and by the linter
(does it report a finding Triton refuses?), in :mod:`.agreement`. Cases come in two groups: ones
Triton loads (some still wrong, which the linter reports as request failures or warnings) and ones
it refuses. ``raw`` cases install the ONNX leaf as written (no python shim): the local server has
no onnxruntime backend, so "unable to find backend library" means the checks Triton's core makes
before it looks for the backend (``ValidateModelConfig``: platform, backend, batching) passed; the
input and output checks come later, so those cases use python models.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import autofill_qa
from .test_lint_rules import CASES as RULE_CASES
from .test_lint_rules import _decoupled_mix, _overwrite_input, _step, auto_complete, edit, edit_source

ONNX = "classifier_onnx"


@dataclass(frozen=True)
class Case:
    """One repository change and the model whose load decides the verdict."""

    id: str
    model: str
    mutate: Callable[[Path], object]
    raw: bool = False  # install without the onnx shim (see the module docstring)


def _rule(rule: str, case_id: str | None = None) -> Case:
    model, mutate = RULE_CASES[rule]
    return Case(case_id or rule, model, mutate)


def _nothing(root: Path) -> None:
    return None


def _batchless_postprocess(with_batch_dim: bool) -> Callable[[Path], None]:
    def change(c):
        c.max_batch_size = 0
        if with_batch_dim:
            c.input[0].dims.insert(0, -1)
            c.output[0].dims.insert(0, -1)
    return lambda root: edit(root, "postprocess", change)


def _add_sub_unbatched_dynamic(c) -> None:  # noqa: ANN001
    c.max_batch_size = 0
    for t in [*c.input, *c.output]:
        t.dims.insert(0, -1)
    c.dynamic_batching.SetInParent()


def _dims_from_reshape(c) -> None:  # noqa: ANN001
    c.input[0].ClearField("dims")
    c.input[0].reshape.shape.append(4)


def _empty_reshape_unbatched(c) -> None:  # noqa: ANN001
    c.max_batch_size = 0
    c.input[0].ClearField("dims")
    c.input[0].dims.append(1)
    c.input[0].reshape.SetInParent()


def _reshape_chunks(c) -> None:  # noqa: ANN001
    c.input[0].ClearField("dims")
    c.input[0].dims.extend([-1, 4])
    c.input[0].reshape.shape.extend([-1, 2])


def _no_backend_no_file(root: Path) -> None:
    edit(root, "add_sub", lambda c: c.ClearField("backend"))
    (root / "add_sub/1/model.py").rename(root / "add_sub/1/main.py")


def _optional_unmapped(root: Path) -> None:
    edit(root, "postprocess", lambda c: c.input.add(name="mask", data_type=11, dims=[3], optional=True))


def _symlinked_config(root: Path) -> None:
    elsewhere = root.parent / "add_sub.pbtxt"
    (root / "add_sub/config.pbtxt").rename(elsewhere)
    (root / "add_sub/config.pbtxt").symlink_to(elsewhere)


def _both_schedulers(root: Path) -> None:
    path = root / "pipeline/config.pbtxt"
    path.write_text(path.read_text() + "\ndynamic_batching { }\n")


# --- what Triton completes (issue 22) ---------------------------------------------------------

_ADD_INPUT0 = '{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}'


def _qa(case: autofill_qa.QaCase) -> Case:
    return Case(f"qa-{case.model}", case.model, case.write)


def _batch_size(config_size: int, declared: int) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        edit(root, "add_sub", lambda c: setattr(c, "max_batch_size", config_size))
        auto_complete(root, "add_sub", f"config.set_max_batch_size({declared})")
    return change


def _member_from_model_py(guarded: bool) -> Callable[[Path], None]:
    """postprocess's config lists no tensors; its auto_complete_config adds the ones the ensemble maps (maybe in an if)."""
    def change(root: Path) -> None:
        edit(root, "postprocess", lambda c: (c.ClearField("input"), c.ClearField("output")))
        calls = ['config.add_input({"name": "probabilities", "data_type": "TYPE_FP32", "dims": [3]})',
                 'config.add_output({"name": "label", "data_type": "TYPE_STRING", "dims": [1]})']
        if guarded:
            calls = ["if not config.as_dict()['input']:", *(f"    {c}" for c in calls)]
        auto_complete(root, "postprocess", *calls)
    return change


def _input0_from_model_py(*lines: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        edit(root, "add_sub", lambda c: c.input[0].ClearField("dims"))
        auto_complete(root, "add_sub", *lines)
    return change


def _python_file(filename: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        edit(root, "add_sub", lambda c: setattr(c, "default_model_filename", filename))
        (root / "add_sub/1/model.py").rename(root / "add_sub/1" / filename)
    return change


def _named_model(folder: str, file: str | None) -> Callable[[Path], None]:
    """A model named ``<name>.<backend>`` whose config names no backend (nor any other model file)."""
    def change(root: Path) -> None:
        (root / folder / "1").mkdir(parents=True)
        text = (root / "add_sub/config.pbtxt").read_text().replace('name: "add_sub"', f'name: "{folder}"')
        (root / folder / "config.pbtxt").write_text(text.replace('backend: "python"\n', ""))
        if file:
            (root / folder / "1" / file).write_text((root / "add_sub/1/model.py").read_text())
    return change


def _instance_method(root: Path) -> None:
    edit_source(root, "add_sub", "class TritonPythonModel:\n",
                "class TritonPythonModel:\n    def auto_complete_config(self, config):\n        return config\n\n")


def _preferred_above_config(root: Path) -> None:
    """max_batch_size 0 in config.pbtxt (8 from model.py) and a preferred size of 4: checked before completion."""
    edit(root, "add_sub", lambda c: (setattr(c, "max_batch_size", 0), c.dynamic_batching.preferred_batch_size.append(4)))
    auto_complete(root, "add_sub", "config.set_max_batch_size(8)")


AUTOCOMPLETE_LOADS = [
    *(_qa(c) for c in autofill_qa.SUCCESS.values()),
    Case("autocomplete-batch-size-equal", "add_sub", _batch_size(8, 8)),
    Case("autocomplete-batch-size-raised", "add_sub", _batch_size(8, 16)),
    Case("autocomplete-decoupled-returns", "add_sub", lambda r: auto_complete(r, "add_sub", "config.set_model_transaction_policy({'decoupled': True})")),
    Case("autocomplete-fills-ensemble-member", "pipeline", _member_from_model_py(guarded=False)),
    Case("autocomplete-fills-dims", "add_sub", _input0_from_model_py(f"config.add_input({_ADD_INPUT0})")),
    Case("autocomplete-loop-over-literal", "add_sub", _input0_from_model_py(
        f"for spec in [{_ADD_INPUT0}]:", "    config.add_input(spec)")),
    Case("python-filename-py", "add_sub", _python_file("main.py")),
    Case("autocomplete-ignored", "add_sub", RULE_CASES["autocomplete-ignored"][1]),  # decoupled ignored too: loads
    Case("backend-from-name-identity", "echo.identity", _named_model("echo.identity", None), raw=True),
]

AUTOCOMPLETE_REFUSED = [
    *(_qa(c) for c in autofill_qa.REFUSED.values()),
    Case("autocomplete-batch-size-below", "add_sub", _batch_size(8, 7)),
    Case("autocomplete-dims-tuple", "add_sub", lambda r: auto_complete(
        r, "add_sub", 'config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": (4,)})')),
    Case("autocomplete-method-unknown", "add_sub", lambda r: auto_complete(r, "add_sub", "config.set_batch_size(8)")),
    Case("autocomplete-instance-method", "add_sub", _instance_method),
    Case("autocomplete-preferred-before-completion", "add_sub", _preferred_above_config),
    _rule("python-filename"),
    Case("backend-from-name-python", "adder.python", _named_model("adder.python", "model.python")),
]

AUTOCOMPLETE_UNDECIDED = [
    _rule("autocomplete-unread"),
    Case("autocomplete-ensemble-member-unread", "pipeline", _member_from_model_py(guarded=True)),
    Case("backend-from-name-unknown", "echo.nosuch", _named_model("echo.nosuch", None)),
]


def _runtime_to_a_file_above(root: Path) -> None:
    """runtime climbs out of the version folder to a file that is there: Triton's "escapes" refusal, not "not found"."""
    RULE_CASES["runtime-escapes"][1](root)
    (root / "add_sub" / "libtriton_python.so").write_bytes(b"")


LOADS = [
    Case("valid-python", "add_sub", _nothing),
    Case("valid-ensemble", "pipeline", _nothing),
    Case("valid-onnx-leaf-core", ONNX, _nothing, raw=True),
    Case("onnx-leaf-explicit-platform", ONNX, lambda r: edit(r, ONNX, lambda c: setattr(c, "platform", "onnxruntime_onnx")), raw=True),
    _rule("platform-conflict"),
    Case("python-unknown-platform", "add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c, "platform", "onnx_runtime"))),
    Case("config-name-empty", "add_sub", lambda r: edit(r, "add_sub", lambda c: c.ClearField("name"))),
    _rule("config-autocomplete"),
    Case("version-folder-0", "add_sub", lambda r: (r / "add_sub/1").rename(r / "add_sub/0")),
    Case("warmup-folder-beside-1", "add_sub", lambda r: (r / "add_sub/warmup").mkdir()),
    _rule("version-not-numeric"),
    _rule("version-leading-zero"),
    _rule("version-stray"),
    _rule("version-policy-missing"),
    _rule("tensor-duplicate"),
    _rule("instance-count-invalid"),
    Case("kind-model", "add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.instance_group[0], "kind", 3))),
    Case("dynamic-batching-unbatched", "add_sub", lambda r: edit(r, "add_sub", _add_sub_unbatched_dynamic)),
    Case("response-cache-plain", "add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.response_cache, "enable", True))),
    Case("ensemble-member-unbatched-same-dims", "pipeline", _batchless_postprocess(False)),
    Case("ensemble-member-unbatched-batch-dim", "pipeline", _batchless_postprocess(True)),
    Case("ensemble-optional-input-unmapped", "pipeline", _optional_unmapped),
    _rule("ensemble-input-overwritten"),
    Case("ensemble-decoupled-one-branch", "pipeline", lambda r: edit(r, "preprocess", lambda c: setattr(c.model_transaction_policy, "decoupled", True))),
    _rule("python-no-execute"),
    _rule("python-undefined-name"),
    _rule("python-no-responses"),
    _rule("python-execute-stub"),
    _rule("decoupled-returns"),
    _rule("bls-target-missing"),
    _rule("bls-output-unknown"),
    _rule("bls-self-call"),
    _rule("bls-cycle"),
    _rule("bls-blocking-depth"),
    _rule("bls-target-dynamic"),
    *AUTOCOMPLETE_LOADS,
]

REFUSED = [
    _rule("name-mismatch"),
    _rule("config-missing"),
    _rule("config-parse"),
    Case("config-parse-two-schedulers", "pipeline", _both_schedulers),
    _rule("config-not-a-file"),
    Case("platform-missing", "add_sub", _no_backend_no_file),
    Case("platform-unknown", ONNX, lambda r: edit(r, ONNX, lambda c: (c.ClearField("backend"), setattr(c, "platform", "onnx_runtime"))), raw=True),
    Case("platform-backend-pair", ONNX, RULE_CASES["platform-backend-pair"][1], raw=True),
    _rule("ensemble-backend"),
    _rule("scheduling-not-ensemble"),
    Case("model-file-missing", "add_sub", lambda r: (r / "add_sub/1/model.py").rename(r / "add_sub/1/main.py")),
    _rule("python-parameter-invalid"),
    _rule("version-none"),
    _rule("version-empty"),
    _rule("version-misread"),
    _rule("version-policy-none"),
    _rule("version-policy-latest-zero"),
    _rule("batch-size-invalid"),
    Case("preferred-batch-size-above", "add_sub", lambda r: edit(r, "add_sub", lambda c: c.dynamic_batching.preferred_batch_size.append(16))),
    Case("preferred-batch-size-zero", "add_sub", lambda r: edit(r, "add_sub", lambda c: c.dynamic_batching.preferred_batch_size.append(0))),
    Case("priority-level-invalid", "add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.dynamic_batching, "priority_levels", 2))),
    Case("preserve-ordering-conflict", "add_sub", lambda r: edit(r, "add_sub", lambda c: (
        setattr(c.dynamic_batching, "priority_levels", 2), setattr(c.dynamic_batching, "default_priority_level", 1),
        setattr(c.dynamic_batching, "preserve_ordering", True)))),
    _rule("response-cache-conflict"),
    _rule("sequence-batching-invalid"),
    _rule("instance-gpus-invalid"),
    Case("kind-model-with-gpus", "add_sub", lambda r: edit(r, "add_sub", lambda c: (setattr(c.instance_group[0], "kind", 3), c.instance_group[0].gpus.append(0)))),
    _rule("tensorrt-only-field", "shape-tensor-on-python"),
    Case("non-linear-io-on-python", "add_sub", lambda r: edit(r, "add_sub", lambda c: setattr(c.input[0], "is_non_linear_format_io", True))),
    Case("profile-on-python", "add_sub", lambda r: edit(r, "add_sub", lambda c: c.instance_group[0].profile.append("0"))),
    _rule("tensor-name-empty"),
    _rule("datatype-invalid"),
    _rule("dims-invalid"),
    Case("dims-empty-with-reshape", "add_sub", lambda r: edit(r, "add_sub", _dims_from_reshape)),
    _rule("reshape-invalid"),
    Case("reshape-empty-unbatched", "add_sub", lambda r: edit(r, "add_sub", _empty_reshape_unbatched)),
    Case("reshape-mismatch", "add_sub", lambda r: edit(r, "add_sub", lambda c: c.input[0].reshape.shape.extend([2, 3]))),
    Case("reshape-mismatch-between-variable-dims", "add_sub", lambda r: edit(r, "add_sub", _reshape_chunks)),
    _rule("tensor-format-dims"),
    _rule("label-file-missing"),
    _rule("batch-io-invalid"),
    _rule("ensemble-instance-group"),
    _rule("ensemble-own-settings", "ensemble-model-warmup"),
    Case("ensemble-optimization", "pipeline", lambda r: edit(r, "pipeline", lambda c: c.optimization.input_pinned_memory.SetInParent())),
    _rule("ensemble-no-steps"),
    _rule("ensemble-step-incomplete"),
    _rule("ensemble-step-missing"),
    _rule("ensemble-version-missing"),
    Case("ensemble-step-version-0", "pipeline", lambda r: edit(r, "pipeline", lambda c: setattr(_step(c, "preprocess"), "model_version", 0))),
    _rule("ensemble-member-invalid"),
    _rule("ensemble-batch-size"),
    _rule("ensemble-map-unknown"),
    _rule("ensemble-input-unmapped"),
    _rule("ensemble-tensor-double"),
    _rule("ensemble-tensor-unproduced"),
    _rule("ensemble-input-unused"),
    _rule("ensemble-tensor-unused"),
    _rule("ensemble-dtype-mismatch"),
    _rule("ensemble-shape-mismatch"),
    Case("ensemble-decoupled-mix", "pipeline", _decoupled_mix),
    _rule("ensemble-cycle"),
    _rule("python-syntax"),
    _rule("python-no-model-class"),
    _rule("python-await-in-sync"),
    _rule("python-undefined-at-load"),
    _rule("metrics-unreadable"),
    _rule("metrics-control-invalid"),
    _rule("metrics-family-unknown"),
    _rule("runtime-escapes"),
    Case("runtime-escapes-to-a-file", "add_sub", _runtime_to_a_file_above),
    *AUTOCOMPLETE_REFUSED,
]

#: what files cannot decide: judged and shown, not counted
UNDECIDED = [
    _rule("instance-kind-gpu"),
    Case("config-symlink-to-a-valid-config", "add_sub", lambda r: _symlinked_config(r)),
    *AUTOCOMPLETE_UNDECIDED,
]

CASES = LOADS + REFUSED + UNDECIDED

#: the cases the test suite loads on Triton by default (about 1.5 min of the 6 the whole corpus takes):
#: every check Triton makes before it starts a python stub (fast), and one or two cases of each slower
#: family. MODEL_RELEASE_AGREEMENT=full runs them all; tests/repository/agreement.py always does.
QUICK = frozenset({
    "valid-python", "valid-ensemble", "valid-onnx-leaf-core", "onnx-leaf-explicit-platform", "version-folder-0",
    "python-unknown-platform", "ensemble-member-unbatched-same-dims", "ensemble-input-overwritten",
    "python-no-execute", "python-execute-stub", "bls-cycle",
    "name-mismatch", "config-missing", "config-parse", "config-parse-two-schedulers", "platform-missing",
    "platform-unknown", "platform-backend-pair", "ensemble-backend", "scheduling-not-ensemble",
    "python-parameter-invalid", "version-none", "version-policy-none", "version-policy-latest-zero",
    "batch-size-invalid", "preferred-batch-size-above", "preferred-batch-size-zero", "priority-level-invalid",
    "preserve-ordering-conflict", "response-cache-conflict", "sequence-batching-invalid", "instance-gpus-invalid",
    "kind-model-with-gpus", "profile-on-python", "dims-empty-with-reshape", "reshape-mismatch-between-variable-dims",
    "label-file-missing", "ensemble-instance-group", "ensemble-model-warmup", "ensemble-optimization",
    "ensemble-no-steps", "ensemble-step-incomplete", "ensemble-step-version-0", "ensemble-member-invalid",
    "ensemble-tensor-double", "ensemble-tensor-unproduced", "ensemble-input-unused", "ensemble-tensor-unused",
    "ensemble-decoupled-mix", "python-syntax", "python-await-in-sync", "python-undefined-at-load",
    "metrics-unreadable", "metrics-control-invalid", "runtime-escapes", "runtime-escapes-to-a-file",
    "instance-kind-gpu", "config-symlink-to-a-valid-config",
    "qa-incomplete_output", "qa-conflicting_max_batch_size", "autocomplete-fills-ensemble-member",
    "autocomplete-preferred-before-completion", "backend-from-name-python",
})


def copy_case(source: Path, destination: Path) -> None:
    """Copy a case repository, symlinks kept as symlinks (Triton follows them; the linter does not)."""
    shutil.copytree(source, destination, symlinks=True)
