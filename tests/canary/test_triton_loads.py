"""The canary Triton loads each model once: python models compiled before the server starts (an ensemble's
load then finds its steps unchanged), and no auto-complete stub when no model completes its own config."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from google.protobuf import json_format

from model_release.triton.local import LocalTriton, precompile_models, runtime_venv
from model_release.triton.server import TritonServer
from model_release.triton.shim import auto_complete_needed, prepare_canary_repository

from .support import LEAF

pytestmark = pytest.mark.integration

ORDER = [LEAF, "iris_post", "iris"]


def _only_iris(iris_repository: Path, destination: Path) -> Path:
    """The shimmed canary copy with just the iris chain (the leaf, its postprocess, the ensemble)."""
    copy = prepare_canary_repository(iris_repository, destination)
    for model in copy.path.iterdir():
        if model.name not in ORDER:
            shutil.rmtree(model)
    return copy.path


def _loads(log: Path, model: str) -> int:
    return len(re.findall(rf'"loading: {re.escape(model)}:1"', log.read_text(errors="replace")))


def test_precompiled_python_models_are_loaded_once_when_their_ensemble_loads(tmp_path, iris_repository) -> None:
    repo = _only_iris(iris_repository, tmp_path / "repository")
    log = tmp_path / "tritonserver.log"
    with LocalTriton(repo, work_dir=tmp_path / "server", log_path=log, precompile=True, ready_timeout=60) as triton:
        server = TritonServer(triton.http_url)
        try:
            server.load(ORDER)
        finally:
            server.close()
    # the stub found current bytecode and wrote nothing, so the ensemble's load did not load its steps again
    assert _loads(log, LEAF) == 1 and _loads(log, "iris_post") == 1, log.read_text(errors="replace")[-3000:]


def test_without_precompiling_the_stub_writes_bytecode_into_the_version_folder(tmp_path, iris_repository) -> None:
    """What precompiling prevents: Triton sees the model's folder changed, and the ensemble's load loads its steps twice."""
    repo = _only_iris(iris_repository, tmp_path / "repository")
    assert not list(repo.glob("*/1/__pycache__"))
    log = tmp_path / "tritonserver.log"
    with LocalTriton(repo, work_dir=tmp_path / "server", log_path=log, ready_timeout=60) as triton:
        server = TritonServer(triton.http_url)
        try:
            server.load(ORDER)
        finally:
            server.close()
    assert list(repo.glob(f"{LEAF}/1/__pycache__/model.*.pyc"))
    assert _loads(log, LEAF) == 2


def test_precompile_models_compiles_each_version_folders_model_py_with_the_given_python(tmp_path, iris_repository) -> None:
    repo = _only_iris(iris_repository, tmp_path / "repository")
    scripts = precompile_models(repo, runtime_venv() / "bin" / "python")
    assert sorted(p.parent.parent.name for p in scripts) == sorted([LEAF, "iris_post"])
    for script in scripts:
        assert list((script.parent / "__pycache__").glob("model.cpython-*.pyc")), script
    assert precompile_models(tmp_path / "empty-but-missing", runtime_venv() / "bin" / "python") == []


def test_the_served_configs_are_the_same_without_auto_complete(tmp_path, iris_repository) -> None:
    repo = _only_iris(iris_repository, tmp_path / "repository")
    assert auto_complete_needed(repo) is None
    served = {}
    for args in ([], ["--disable-auto-complete-config"]):
        key = "strict" if args else "default"
        with LocalTriton(repo, work_dir=tmp_path / key, precompile=True, server_args=args, ready_timeout=60) as triton:
            server = TritonServer(triton.http_url)
            try:
                server.load(ORDER)
                served[key] = {m: json_format.MessageToDict(server.config(m)) for m in ORDER}
            finally:
                server.close()
    assert served["strict"] == served["default"]


def test_auto_complete_stays_on_for_a_model_that_completes_itself_or_declares_no_tensors(tmp_path, iris_repository) -> None:
    repo = _only_iris(iris_repository, tmp_path / "repository")
    assert auto_complete_needed(repo) is None
    script = repo / "iris_post" / "1" / "model.py"
    original = script.read_text()
    script.write_text(original + "\n\ndef auto_complete_config(config):\n    return config\n")
    assert auto_complete_needed(repo) == f'model "iris_post" defines auto_complete_config ({script})'
    script.write_text(original.replace("class TritonPythonModel:", "class TritonPythonModel:\n    @staticmethod\n"
                                       "    def auto_complete_config(c):\n        return c\n", 1))
    assert "defines auto_complete_config" in (auto_complete_needed(repo) or "")
    script.write_text("def broken(:\n")
    assert auto_complete_needed(repo) == f"{script} does not parse"
    script.write_text(original)
    from model_release.repository.config import read_config, write_config

    path = repo / "iris_post" / "config.pbtxt"
    config = read_config(path)
    config.ClearField("input")
    write_config(path, config)
    assert auto_complete_needed(repo) == 'model "iris_post" declares no inputs in config.pbtxt'
