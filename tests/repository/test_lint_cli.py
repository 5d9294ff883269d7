"""``model-release lint PATH [--json]`` through lint.cli.main."""

from __future__ import annotations

import pytest

import json
import shutil
import subprocess
import sys

from model_release.repository.lint.cli import main

from .lint_repos import write_valid_repository


def test_a_clean_repository_exits_0_with_the_load_order(tmp_path, capsys):
    repo = write_valid_repository(tmp_path / "models")
    assert main([str(repo)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: 7 models, 0 errors, 0 warnings; load order: ")


def test_errors_exit_1_one_finding_a_line(tmp_path, capsys):
    repo = write_valid_repository(tmp_path / "models")
    (repo / "add_sub" / "1" / "model.py").unlink()
    shutil.copytree(repo / "bls_sync" / "1", repo / "bls_sync" / "2")
    assert main([str(repo)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("error: add_sub/1/: [version-empty] model 'add_sub'")
    assert lines[1].startswith("warning: bls_sync/config.pbtxt: [version-stray] model 'bls_sync'")
    assert lines[2].startswith("FAILED: 7 models, 1 errors, 1 warnings")


def test_json_output_for_machines(tmp_path):
    repo = write_valid_repository(tmp_path / "models")
    (repo / "pipeline" / "config.pbtxt").write_text((repo / "pipeline" / "config.pbtxt").read_text().replace('"postprocess"', '"post"', 1))
    proc = subprocess.run([sys.executable, "-m", "model_release.repository.lint.cli", str(repo), "--json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is False
    # as in Triton, the step still writes "label" (its output_map says so): only the missing model is the error
    assert [(e["rule"], e["model"]) for e in report["errors"]] == [("ensemble-step-missing", "pipeline")]
    assert report["load_order"].index("classifier_onnx") < report["load_order"].index("pipeline")


def test_a_missing_path_is_bad_input(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere")]) == 2
    assert f"repository path '{tmp_path / 'nowhere'}' does not exist" in capsys.readouterr().err


def test_a_folder_without_a_model_folder_is_bad_input_not_ok(tmp_path, capsys):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "config.pbtxt").write_text('name: "x"')  # a file, not a model folder
    assert main([str(tmp_path / "repo")]) == 2
    captured = capsys.readouterr()
    assert "holds no model folder, so there is nothing to check" in captured.err and "ok:" not in captured.out
    (tmp_path / "repo" / "x").mkdir()  # one folder: linted (and refused for what it lacks), not refused as empty
    assert main([str(tmp_path / "repo")]) == 1


@pytest.mark.parametrize("argv", [["--explain", "runtime-escapes"], ["--explain=runtime-escapes"]])
def test_explain_takes_the_rule_as_the_help_writes_it(argv, capsys):
    from model_release.cli import main as cli_main

    assert cli_main(["lint", *argv]) == 0
    assert capsys.readouterr().out.startswith("runtime-escapes (error):")
