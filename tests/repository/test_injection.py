"""Nothing from a spec or a model name can inject code into model.py or a path outside the repository."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from model_release.errors import AssembleError, SpecError
from model_release.repository.assemble import assemble
from model_release.repository.render import py_literal, render
from model_release.workspace import Workspace

from .support import export_result, intake_result, make_spec

HOSTILE = [
    '"); import os; os.system("touch /tmp/pwned") #',
    "'''\nimport os\n'''",
    "{{ 7*7 }}",
    "{% raw %}x{% endraw %}",
    "\\\nimport os",
    "../../etc/passwd",
]


def _code_of(result) -> dict[str, str]:
    repo = Path(result.repository_dir)
    return {str(p.relative_to(repo)): p.read_text() for p in repo.rglob("model.py")}


def test_labels_are_data_never_code(onnx_models, tmp_path):
    plain = assemble(make_spec(shape="classifier", labels=["a", "b", "c"]), intake_result(),
                     export_result(onnx_models["lr"]), Workspace("plain", tmp_path))
    hostile = assemble(make_spec(shape="classifier", labels=HOSTILE[:3]), intake_result(),
                       export_result(onnx_models["lr"]), Workspace("hostile", tmp_path))
    assert _code_of(hostile) == _code_of(plain)  # the code does not depend on the labels at all
    data = (Path(hostile.repository_dir) / "iris_postprocess" / "1" / "labels.json").read_text()
    import json

    assert json.loads(data)["labels"] == HOSTILE[:3]
    for text in _code_of(hostile).values():
        assert "pwned" not in text and "49" not in text
        ast.parse(text)


@pytest.mark.parametrize("name", ["../evil", "a/b", "x'; import os", "évil", ""])
def test_hostile_release_names_are_refused_by_the_spec(name):
    with pytest.raises(SpecError, match="name"):
        make_spec(name, shape="single")


@pytest.mark.parametrize("bad", HOSTILE + ["a b", "x\n", 'q"'])
def test_template_values_must_be_plain_names(bad):
    with pytest.raises(AssembleError, match="not a plain name"):
        py_literal(bad)
    with pytest.raises(AssembleError):
        py_literal([("ok", bad)])


def test_literals_round_trip_through_python():
    for value in ["iris_model", 0.9, 3, True, ["a", "b"], [("float_input", "float32")]]:
        assert ast.literal_eval(py_literal(value)) == value


def test_a_template_cannot_print_an_unchecked_value(tmp_path, monkeypatch):
    (tmp_path / "bad.py.j2").write_text("MODEL = {{ name }}\n")
    (tmp_path / "good.py.j2").write_text("MODEL = {{ name | py }}\n")
    monkeypatch.setenv("MODEL_RELEASE_TEMPLATES", str(tmp_path))
    with pytest.raises(AssembleError, match="without the 'py' filter"):
        render("bad.py.j2", name="iris")
    assert render("good.py.j2", name="iris") == "MODEL = 'iris'\n"


def test_hostile_onnx_tensor_names_stop_the_assembler(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    evil = 'x"]; import os #'
    graph = helper.make_graph(
        [helper.make_node("Identity", [evil], ["probabilities"])], "g",
        [helper.make_tensor_value_info(evil, TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 3])],
    )
    path = tmp_path / "evil.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(AssembleError, match="not a plain name"):
        assemble(make_spec(shape="classifier", preprocess=True), intake_result(), export_result(path), Workspace("evil", tmp_path / "ws"))


@pytest.mark.parametrize(("shape", "refused_as"), [
    ("single", "model name"),  # the model folder's name
    ("classifier", "template value"),  # the name as rendered into the python models
    ("cascade", "template value"),
])
def test_a_name_with_a_trailing_newline_is_refused(onnx_models, tmp_path, shape, refused_as):
    # the spec's own name check lets "iris\n" through ($ matches before a final newline)
    block = {"cascade": {"large": str(onnx_models["tree"]), "threshold": 0.9}} if shape == "cascade" else {}
    spec = make_spec(shape=shape, **block)
    spec = spec.model_copy(update={"name": "iris\n"})
    with pytest.raises(AssembleError, match=rf"^{refused_as} 'iris\\n' is not a plain name \(.*\); "):
        assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("nl", tmp_path))
    assert not any("\n" in p.name for p in tmp_path.rglob("*"))


def test_cascade_paths_are_only_read_and_files_stay_inside(onnx_models, tmp_path):
    spec = make_spec(base_dir=tmp_path, shape="cascade",
                     cascade={"small": "release", "large": str(onnx_models["tree"]), "threshold": 0.9})
    result = assemble(spec, intake_result(), export_result(onnx_models["lr"]), Workspace("cas", tmp_path / "ws"))
    release_dir = Path(result.manifest_path).parent.resolve()
    written = [p.resolve() for p in release_dir.rglob("*")]
    assert all(p.is_relative_to(release_dir) for p in written)
    assert sorted(p.name for p in Path(result.repository_dir).iterdir()) == ["iris", "iris_large", "iris_small"]
