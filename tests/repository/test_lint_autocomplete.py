"""The linter checks the config Triton completes (issue 22): python auto_complete_config, ONNX and plan
files, the backend from the model name, and --disable-auto-complete-config. Each rule with a case
just inside and one just outside; Triton's own QA cases (:mod:`.autofill_qa`) as its test.sh lays
them out. What the real Triton does with these is checked in the agreement corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_release.repository.lint import lint_repository
from model_release.repository.lint.cli import main

from .autofill_qa import REFUSED, SUCCESS
from .lint_repos import write_valid_repository
from .test_lint_rules import auto_complete, edit

ADD_INPUT0 = '{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}'


def _found(repo: Path, model: str | None = None, **options) -> dict[str, list[str]]:
    """rule -> messages, for ``model`` (all models when None)."""
    out: dict[str, list[str]] = {}
    for f in lint_repository(repo, **options).findings:
        if model is None or f.model == model:
            out.setdefault(f.rule, []).append(f"{f.severity}: {f.message}")
    return out


def _errors(repo: Path, model: str | None = None, **options) -> set[str]:
    return {f.rule for f in lint_repository(repo, **options).errors if model is None or f.model == model}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_valid_repository(tmp_path / "models")


# --- Triton's QA cases --------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(SUCCESS), ids=str)
def test_every_qa_case_triton_loads_lints_without_an_error(case, tmp_path):
    root = SUCCESS[case].write(tmp_path / "models")
    report = lint_repository(root)
    assert report.errors == [], [str(f) for f in report.errors]
    # no backend in any of them (python from model.py); six of them, as in Triton's QA, have `pass` for execute
    assert {f.rule for f in report.warnings} <= {"platform-inferred", "python-execute-stub"}
    stubs = {f.model for f in report.warnings if f.rule == "python-execute-stub"}
    assert stubs == {model for model, (text, source) in SUCCESS[case].models.items()
                     if source and "        pass\n" in source and 'platform: "ensemble"' not in (text or "")}


@pytest.mark.parametrize("case", sorted(REFUSED), ids=str)
def test_every_qa_case_triton_refuses_is_refused(case, tmp_path):
    root = REFUSED[case].write(tmp_path / "models")
    refused = [f for f in lint_repository(root).errors if f.model == case]
    assert [f.rule for f in refused] in (["autocomplete-conflict"], ["autocomplete-invalid"]), [str(f) for f in refused]
    assert refused[0].file == f"{case}/1/model.py" and "when Triton" in refused[0].message + " when Triton", refused[0]
    assert "Triton refuses the model" in refused[0].message or "when Triton loads" in refused[0].message \
        or "when Triton calls it" in refused[0].message


def test_a_qa_conflict_names_both_values_and_triton_s_words(tmp_path):
    root = REFUSED["input_mismatch_dims"].write(tmp_path / "models")
    (message,) = _found(root)["autocomplete-conflict"]
    assert "'INPUT1' with dims [4], config.pbtxt with [16]" in message
    assert "the model expects dims [4] but the model configuration specifies dims [16]" in message


def test_with_auto_complete_off_the_incomplete_qa_cases_are_refused(tmp_path):
    root = SUCCESS["incomplete_output"].write(tmp_path / "models")
    assert _errors(root, auto_complete=False) == {"datatype-invalid", "dims-invalid"}
    assert _errors(root) == set()


# --- autocomplete-conflict: just inside, just outside -------------------------------------


@pytest.mark.parametrize("declared, refused", [(8, False), (9, False), (7, True)])
def test_set_max_batch_size_may_raise_the_config_s_but_not_lower_it(repo, declared, refused):
    auto_complete(repo, "add_sub", f"config.set_max_batch_size({declared})")
    assert ("autocomplete-conflict" in _errors(repo, "add_sub")) == refused


@pytest.mark.parametrize("dims, refused", [("[4]", False), ("(4,)", True), ("[5]", True)])
def test_declared_dims_must_equal_the_config_s_list(repo, dims, refused):
    auto_complete(repo, "add_sub", f'config.add_input({{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": {dims}}})')
    assert ("autocomplete-conflict" in _errors(repo, "add_sub")) == refused


@pytest.mark.parametrize("config_policy, declared, refused", [
    (None, True, False), (True, True, False), (False, True, True), (False, False, False)])
def test_decoupled_from_model_py_must_agree_with_the_config(repo, config_policy, declared, refused):
    if config_policy is not None:
        edit(repo, "add_sub", lambda c: setattr(c.model_transaction_policy, "decoupled", config_policy))
    auto_complete(repo, "add_sub", f"config.set_model_transaction_policy(dict(decoupled={declared}))")
    errors = _errors(repo, "add_sub")
    assert ("autocomplete-conflict" in errors) == refused
    if not refused:  # the completed config is decoupled: execute returning responses is what is wrong then
        assert ("decoupled-returns" in errors) == declared


def test_dynamic_batching_from_model_py_conflicts_with_a_sequence_batcher_only(repo):
    auto_complete(repo, "add_sub", "config.set_dynamic_batching()")
    assert _errors(repo, "add_sub") == set()
    edit(repo, "add_sub", lambda c: c.sequence_batching.SetInParent())
    assert _errors(repo, "add_sub") == {"autocomplete-conflict"}


def test_preferred_sizes_are_checked_before_completion_too(repo):
    """ValidateModelConfig runs on config.pbtxt before the backend completes it, and again after."""
    edit(repo, "add_sub", lambda c: c.dynamic_batching.preferred_batch_size.append(8))
    auto_complete(repo, "add_sub", "config.set_max_batch_size(16)")
    assert _errors(repo, "add_sub") == set()
    edit(repo, "add_sub", lambda c: setattr(c, "max_batch_size", 0))
    assert _errors(repo, "add_sub") == {"preferred-batch-size"}


# --- autocomplete-invalid -------------------------------------------------------------------


@pytest.mark.parametrize("call, refused", [
    (f"config.add_input({ADD_INPUT0})", False),
    ('config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32"})', True),
    ('config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4], "optional": False})', False),
    ('config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4], "optional": False})', True),
    ("config.set_model_transaction_policy({'decoupled': False})", False),
    ("config.set_model_transaction_policy({'decouple': False})", True),
    ("config.set_batch_size(8)", True),
])
def test_calls_that_raise_whatever_the_config(repo, call, refused):
    auto_complete(repo, "add_sub", call)
    assert _errors(repo, "add_sub") == ({"autocomplete-invalid"} if refused else set())


@pytest.mark.parametrize("header, refused", [
    ("    @staticmethod\n    def auto_complete_config(config):\n", False),
    ("    @classmethod\n    def auto_complete_config(cls, config):\n", False),
    ("    def auto_complete_config(config):\n", False),
    ("    def auto_complete_config(self, config):\n", True),
    ("    @staticmethod\n    async def auto_complete_config(config):\n", True),
])
def test_triton_calls_it_on_the_class_with_one_argument(repo, header, refused):
    path = repo / "add_sub/1/model.py"
    path.write_text(path.read_text().replace("class TritonPythonModel:\n",
                                             f"class TritonPythonModel:\n{header}        return config\n\n"))
    assert _errors(repo, "add_sub") == ({"autocomplete-invalid"} if refused else set())


def test_a_data_type_triton_cannot_read_back_drops_the_whole_completion(repo):
    """Measured on 2.51: the model loads with config.pbtxt untouched (max_batch_size, decoupled, tensors)."""
    auto_complete(repo, "add_sub", "config.set_model_transaction_policy(dict(decoupled=True))",
                  'config.add_input({"name": "INPUT2", "data_type": "TYPE_FP32", "dims": [4]})')
    assert _errors(repo, "add_sub") == {"decoupled-returns"}  # the completion holds: decoupled
    path = repo / "add_sub/1/model.py"
    path.write_text(path.read_text().replace('"INPUT2", "data_type": "TYPE_FP32"', '"INPUT2", "data_type": "FP32"'))
    found = _found(repo, "add_sub")
    assert set(found) == {"autocomplete-ignored"} and "'FP32', not a Triton data type" in found["autocomplete-ignored"][0]
    path.write_text(path.read_text().replace('"INPUT2", "data_type": "FP32"', '"INPUT0", "data_type": "FP32"'))
    assert _errors(repo, "add_sub") == {"autocomplete-conflict"}  # config.pbtxt says TYPE_FP32: Python compares first


def test_an_auto_complete_config_that_returns_nothing_is_refused(repo):
    path = repo / "add_sub/1/model.py"
    path.write_text(path.read_text().replace("class TritonPythonModel:\n", (
        "class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(config):\n"
        "        config.set_max_batch_size(8)\n\n")))
    (message,) = _found(repo, "add_sub")["autocomplete-invalid"]
    assert "must return a valid pb.ModelConfig object" in message and "return config" in message


# --- autocomplete-unread: what cannot be read is a warning ------------------------------------


def test_a_dims_check_that_depends_on_a_computed_completion_is_a_warning(repo):
    edit(repo, "add_sub", lambda c: c.input[0].ClearField("dims"))
    assert _errors(repo, "add_sub") == {"dims-invalid"}
    auto_complete(repo, "add_sub", "size = 4", f"config.add_input({ADD_INPUT0.replace('[4]', '[size]')})")
    assert _errors(repo, "add_sub") == set()  # a name bound once to a literal is read
    auto_complete(repo, "add_sub", "size = len(config.as_dict()['output'])",
                  f"config.add_input({ADD_INPUT0.replace('[4]', '[size]')})")
    found = _found(repo, "add_sub")
    assert _errors(repo, "add_sub") == set() and "dims-invalid" not in found
    (message,) = found["autocomplete-unread"]
    assert message.startswith("warning: ") and "[dims-invalid, only a warning" in message
    assert "the argument of add_input is computed at run time" in message


def test_an_ensemble_whose_member_completes_in_a_branch_gets_warnings(repo):
    edit(repo, "postprocess", lambda c: (c.ClearField("input"), c.ClearField("output")))
    assert "ensemble-map-unknown" in _errors(repo, "pipeline")
    auto_complete(repo, "postprocess", "if not config.as_dict()['input']:",
                  '    config.add_input({"name": "probabilities", "data_type": "TYPE_FP32", "dims": [3]})')
    assert _errors(repo) == set()
    messages = _found(repo, "pipeline")["autocomplete-unread"]
    assert any("the config is used inside an if" in m for m in messages), messages


def test_a_literal_completion_fills_an_ensemble_member(repo):
    edit(repo, "postprocess", lambda c: (c.ClearField("input"), c.ClearField("output")))
    auto_complete(repo, "postprocess", 'config.add_input({"name": "probabilities", "data_type": "TYPE_FP32", "dims": [3]})',
                  'config.add_output({"name": "label", "data_type": "TYPE_STRING", "dims": [1]})')
    assert lint_repository(repo).findings == []
    edit(repo, "pipeline", lambda c: setattr(c.output[1], "data_type", 8))  # label: INT32 now, STRING from model.py
    assert _errors(repo, "pipeline") == {"ensemble-dtype-mismatch"}


# --- ONNX and TensorRT files ------------------------------------------------------------------


def test_onnx_outputs_left_out_are_taken_from_the_file(tmp_path, onnx_models):
    repo = write_valid_repository(tmp_path / "models", onnx_models["lr"])
    edit(repo, "classifier_onnx", lambda c: c.ClearField("output"))
    assert lint_repository(repo).findings == []
    assert "ensemble-map-unknown" in _errors(repo, auto_complete=False)
    edit(repo, "postprocess", lambda c: c.input[0].dims.__setitem__(0, 4))  # the file says 3 probabilities
    assert "ensemble-shape-mismatch" in _errors(repo, "pipeline")


def test_an_onnx_file_that_cannot_batch_under_a_max_batch_size_is_refused(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["float_input"], ["probabilities"])], "g",
                              [helper.make_tensor_value_info("float_input", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [2, 3])])
    repo = write_valid_repository(tmp_path / "models")
    onnx.save(helper.make_model(graph), repo / "classifier_onnx/1/model.onnx")
    edit(repo, "classifier_onnx", lambda c: c.ClearField("output"))
    assert "autocomplete-conflict" in _errors(repo, "classifier_onnx")


def test_an_unreadable_onnx_file_or_a_plan_makes_the_checks_on_its_tensors_warnings(repo):
    edit(repo, "classifier_onnx", lambda c: c.ClearField("output"))  # model.onnx holds placeholder bytes
    assert _errors(repo) == set()
    assert "autocomplete-unread" in _found(repo, "classifier_onnx") and "autocomplete-unread" in _found(repo, "pipeline")
    (repo / "classifier_onnx/1/model.onnx").rename(repo / "classifier_onnx/1/model.plan")
    edit(repo, "classifier_onnx", lambda c: setattr(c, "backend", "tensorrt"))
    (message,) = _found(repo, "classifier_onnx")["autocomplete-unread"]
    assert "no outputs" in message and "cannot read without TensorRT" in message
    assert _errors(repo) == set()
    assert "ensemble-map-unknown" in _errors(repo, auto_complete=False)


# --- the backend from the model's name, the python file name ------------------------------------


def _bare_model(repo: Path, folder: str, file: str | None = None) -> None:
    (repo / folder / "1").mkdir(parents=True)
    (repo / folder / "config.pbtxt").write_text("max_batch_size: 0\n")
    if file:
        (repo / folder / "1" / file).write_text((repo / "add_sub/1/model.py").read_text())


@pytest.mark.parametrize("folder, file, errors, backend", [
    ("echo.identity", None, set(), "'identity'"),
    ("echo.my.backend", None, set(), "'my.backend'"),  # after the first dot, as Triton splits it
    ("echo.identity", "model.py", set(), "'python'"),  # a model file Triton knows goes first
    ("adder.python", "model.python", {"python-filename"}, "'python'"),
    ("echo", None, {"platform-missing"}, None),
])
def test_the_backend_comes_from_the_name_after_the_model_files(repo, folder, file, errors, backend):
    _bare_model(repo, folder, file)
    found = _found(repo, folder)
    assert _errors(repo, folder) == errors
    if backend:
        assert any(f"backend {backend}" in m for m in found["platform-inferred"]), found


def test_a_python_model_file_must_end_in_py(repo):
    edit(repo, "add_sub", lambda c: setattr(c, "default_model_filename", "main.py"))
    (repo / "add_sub/1/model.py").rename(repo / "add_sub/1/main.py")
    assert _errors(repo) == set()
    edit(repo, "add_sub", lambda c: setattr(c, "default_model_filename", "main.pyc"))
    (repo / "add_sub/1/main.py").rename(repo / "add_sub/1/main.pyc")
    assert _errors(repo) == {"python-filename"}


def test_no_config_with_auto_complete_off_is_refused(repo):
    (repo / "add_sub/config.pbtxt").unlink()
    assert "config-autocomplete" in _found(repo, "add_sub")
    assert _errors(repo, "add_sub", auto_complete=False) == {"config-missing"}


@pytest.mark.parametrize("flags", [["--disable-auto-complete-config"], ["--strict-model-config", "true"]])
def test_the_cli_flags_turn_completion_off(tmp_path, flags, capsys):
    root = SUCCESS["incomplete_output"].write(tmp_path / "models")
    assert main([str(root)]) == 0
    assert main([str(root), *flags]) == 1
    assert "[dims-invalid]" in capsys.readouterr().out


def test_a_bls_call_to_a_model_completed_in_a_branch_is_a_warning_and_only_that(repo):
    edit(repo, "add_sub", lambda c: c.ClearField("output"))
    assert _errors(repo) == {"bls-output-unknown"}
    auto_complete(repo, "add_sub", "for name in config.as_dict()['input']:",
                  '    config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]})')
    assert _errors(repo) == set() and "autocomplete-unread" in _found(repo, "bls_sync")
    edit(repo, "bls_sync", lambda c: c.input[0].ClearField("dims"))  # its own config: not the target's business
    assert _errors(repo) == {"dims-invalid"}
